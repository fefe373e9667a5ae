package releasehistory

// ForgetRecentWrites drops the objects of the recorder's recent writes, as
// a minute without writing would.
func (r *Recorder) ForgetRecentWrites() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.recent)
}
