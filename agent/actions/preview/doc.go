// Package preview compares two renders of a Helm release, the live one and
// the one an upgrade would apply, and returns the bounded, redacted change
// an agent answers to a preview action (wire.PreviewResult): objects added,
// removed and changed, a unified diff of each changed manifest, and a diff
// of the values.
//
// It is pure: it reads no cluster and renders nothing (agent/actions runs
// Helm and hands it the two manifests and values).
//
// What is never sent:
//   - a Secret's data and stringData: a Secret is listed as added, removed
//     or changed with Secret set and no diff;
//   - sensitive values: a value whose key (or a parent's key) matches
//     SensitiveKey (password, passwd, secret, token, credential, private,
//     auth, and apiKey, access_key, signing-key and the like, in any case
//     and within a longer name; not "key" alone, as a toleration has), and any
//     value that feeds a Secret (it equals, or is contained in, a data or
//     stringData value of a Secret of either render). They are replaced in
//     the values diff by "<redacted>" (or "<redacted: changed>" on the
//     new side when the value changed), and every occurrence of one (of at
//     least MinRedacted bytes) in a manifest diff by "<redacted>".
//
// Bounds: each diff at most wire.MaxPreviewObjectDiff bytes, all diffs
// together at most wire.MaxPreviewTotal, at most wire.MaxPreviewObjects
// objects listed; and Fit leaves out the largest diffs until the answer
// encodes in at most MaxEncoded bytes of JSON (escaping "<" costs 6
// bytes). What is cut is marked Truncated and said in Note. The digest,
// line and object counts are computed before any cut.
//
// It is not a three-way merge: the comparison is of Helm's manifests (what
// the chart renders), not of the live objects on the cluster, exactly as
// Helm's upgrade itself decides what to change. Hooks are not compared.
package preview
