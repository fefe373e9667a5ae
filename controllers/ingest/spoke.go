package ingest

// Spoke is the Spoke object a request was authenticated as. The receiver
// found it among the Spokes of the path's name by the key that verified the
// request, so it is one Spoke even when Spokes of that name live in several
// namespaces: whoever records for it reads and writes that Spoke's
// namespace, never looks it up by name again.
type Spoke struct {
	// Namespace of the Spoke. Empty only from a receiver that knows spokes
	// by name alone (no spoke directory): the Spoke is then the one live
	// Spoke of that name, and a name used in several namespaces is unknown.
	Namespace string
	// Name of the Spoke, as in the request's path.
	Name string
	// KeyID is the wire.KeyID of the key that verified the request (the
	// first 16 hex digits of its SHA-256), or "" when not known.
	KeyID string
}

// String returns namespace/name, or the name alone without a namespace.
func (s Spoke) String() string {
	if s.Namespace == "" {
		return s.Name
	}
	return s.Namespace + "/" + s.Name
}
