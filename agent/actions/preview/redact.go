package preview

import "regexp"

// credentialPattern finds a credential written out as "name: value" or
// "name=value" (password=..., Authorization: Bearer ..., api_key: ...).
var credentialPattern = regexp.MustCompile(`(?i)\b(password|passwd|pwd|secret|token|api[-_]?key|access[-_]?key|authorization|credentials?)(["']?\s*[:=]\s*)(bearer\s+|basic\s+)?("[^"]*"|'[^']*'|\S+)`)

// Redact replaces in text, which leaves the spoke (a failed Helm test's
// log), every sensitive string of a release: the data of the Secrets its
// manifest renders, the values under sensitive keys of values, and any
// credential written out as "password=...", "token: ..." or
// "Authorization: Bearer ...". What the release does not know (a Secret
// it does not render) is redacted only in those forms.
func Redact(manifest, namespace string, values map[string]any, text string) string {
	objs, err := parse(manifest, namespace)
	if err != nil {
		objs = nil // the forms below still apply
	}
	text = newRedactor(objs, nil, values, nil).text(text)
	return credentialPattern.ReplaceAllString(text, "${1}${2}${3}"+Redacted)
}
