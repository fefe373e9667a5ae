package slack

// ForgetLimits clears the per-channel limiter, as if the time it asked to
// wait had passed.
func ForgetLimits(n *Notifier) {
	n.limiter.mu.Lock()
	defer n.limiter.mu.Unlock()
	clear(n.limiter.next)
}
