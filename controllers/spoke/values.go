package spoke

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/config"
)

// DefaultAllowedValues returns the agent chart values a Spoke's
// spec.agentBootstrap.values (and a SpokeClass's spec.agent.values) may set
// unless the hub's operator says otherwise (--bootstrap-allowed-values).
// None of them changes what runs (the image, its arguments), widens the
// agent's rights, or lets the hub's promotions write on the spoke:
//
//   - replicas, resources, logLevel: how much of the agent runs, and how
//     much it logs;
//   - watchNamespaces: the namespaces the agent watches; its read rights are
//     bound there only (fewer than the default, every namespace);
//   - webhook.enabled, backfill.enabled: switch the ownership webhooks or
//     the backfill off (fewer rights);
//   - backfill.namespaces: bind the backfill's label patch in these
//     namespaces only (fewer than the default, cluster-wide);
//   - networkPolicy: restrict the ingress to the agent's Pods.
//
// The namespace lists may not name the system namespaces (see
// protectedNamespaces). Left out on purpose, among others: image and
// imagePullSecrets (what runs, with the agent's rights), extraArgs (its
// flags), helmStrategy (the hub's promotions writing on the spoke),
// backfill.protectedNamespaces (the policy that keeps the agent out of the
// system namespaces), webhook.certificate, podAnnotations, podLabels,
// nodeSelector, tolerations, affinity, priorityClassName (sidecars, the
// control plane's nodes, preemption), podDisruptionBudget (blocking drains)
// and metrics.serviceMonitor. spoke and hub are the hub's own and never
// allowed.
func DefaultAllowedValues() []string {
	return []string{
		"replicas", "resources", "logLevel", "watchNamespaces",
		"webhook.enabled", "backfill.enabled", "backfill.namespaces", "networkPolicy",
	}
}

// hubSetValues are the agent chart's values the hub sets itself: no
// allow-list may hand them to a Spoke's author.
var hubSetValues = []string{"spoke", "hub"}

// namespaceListValues are the values that bind the agent's rights per
// namespace: a bootstrap may not name protectedNamespaces in them.
var namespaceListValues = [][]string{{"watchNamespaces"}, {"backfill", "namespaces"}}

// protectedNamespaces are the namespaces a bootstrap never binds the agent's
// rights in (the agent chart's default backfill.protectedNamespaces): bound
// per namespace, the backfill's patch there would escape the policy that
// keeps the agent out of them.
var protectedNamespaces = []string{"kube-system", "kube-node-lease", "kube-public"}

var valueSegment = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]*$`)

// ValidateAllowedValues checks an allow-list of agent chart values
// (--bootstrap-allowed-values): each entry is a dotted path of the agent
// chart's values.yaml (image.repository, helmStrategy) or lies under a
// free-form map of it (podLabels.team), and is none of the values the hub
// sets (spoke, hub).
func ValidateAllowedValues(allowed []string) error {
	c, err := config.Chart(config.AgentChart)
	if err != nil {
		return err
	}
	var errs []error
	for _, entry := range allowed {
		if err := validateAllowedValue(c.Values, entry); err != nil {
			errs = append(errs, fmt.Errorf("--bootstrap-allowed-values: %q: %w", entry, err))
		}
	}
	return errors.Join(errs...)
}

func validateAllowedValue(defaults map[string]any, entry string) error {
	if entry == "" {
		return errors.New("empty entry (a stray comma?)")
	}
	path := strings.Split(entry, ".")
	for _, seg := range path {
		if !valueSegment.MatchString(seg) {
			return errors.New("not a dotted path of chart values (letters, digits, - and _ between dots, e.g. backfill.namespaces)")
		}
	}
	if slices.Contains(hubSetValues, path[0]) {
		return fmt.Errorf("%s is set by the hub (the spoke's name, the hub's URL and CA), never by a Spoke", path[0])
	}
	var node any = defaults
	for i, seg := range path {
		m, isMap := node.(map[string]any)
		switch {
		case isMap && len(m) == 0:
			return nil // a free-form map: any key below it
		case !isMap:
			return fmt.Errorf("%s holds a single value, with nothing below it", strings.Join(path[:i], "."))
		}
		v, ok := m[seg]
		if !ok {
			return fmt.Errorf("the agent's chart has no value %s (see config/charts/tugboat-agent/values.yaml)", strings.Join(path[:i+1], "."))
		}
		node = v
	}
	return nil
}

// DecodeBootstrapValues decodes boot's chart values; when the hub refuses
// to install with them it returns the reason and a message that names the
// field (spec.agentBootstrap.values of a Spoke, spec.agent.values of a
// SpokeClass) and every value refused (refusedValues).
func DecodeBootstrapValues(boot *tugboatv1alpha1.AgentBootstrap, field string, allowed []string) (map[string]any, tugboatv1alpha1.ConditionReason, string) {
	values := map[string]any{}
	if boot.Values != nil && len(boot.Values.Raw) > 0 {
		if err := json.Unmarshal(boot.Values.Raw, &values); err != nil {
			return nil, tugboatv1alpha1.InvalidSpecReason, field + ": " + err.Error()
		}
	}
	if refused := refusedValues(values, allowed); len(refused) > 0 {
		return nil, tugboatv1alpha1.ValuesNotAllowedReason, field + " " + strings.Join(refused, "; ") +
			": the hub installs the agent with the workload cluster's admin credential, so a Spoke may set only the values its operator allows; nothing is installed"
	}
	return values, "", ""
}

// refusedValues returns what is wrong with values a Spoke asks the agent's
// chart to be installed with, or nil: every value it sets (each leaf, by
// its dotted path; a null or an empty map counts as one) must be one of
// allowed or lie under one, and the namespace lists of namespaceListValues
// may not name protectedNamespaces.
func refusedValues(values map[string]any, allowed []string) []string {
	allow := make([][]string, 0, len(allowed))
	for _, a := range allowed {
		allow = append(allow, strings.Split(a, "."))
	}
	covered := func(path []string) bool {
		return slices.ContainsFunc(allow, func(a []string) bool {
			return len(a) <= len(path) && slices.Equal(a, path[:len(a)])
		})
	}
	var notAllowed []string
	var walk func(path []string, v any)
	walk = func(path []string, v any) {
		if m, ok := v.(map[string]any); ok && (len(m) > 0 || len(path) == 0) {
			for k, child := range m {
				walk(append(slices.Clone(path), k), child)
			}
			return
		}
		if !covered(path) {
			notAllowed = append(notAllowed, strings.Join(path, "."))
		}
	}
	walk(nil, values)
	sort.Strings(notAllowed)
	var refused []string
	if len(notAllowed) > 0 {
		refused = append(refused, fmt.Sprintf("sets %s, which the hub does not allow (its --bootstrap-allowed-values: %s)",
			strings.Join(notAllowed, ", "), orNone(allowed)))
	}
	for _, p := range namespaceListValues {
		for _, ns := range namespacesAt(values, p) {
			if slices.Contains(protectedNamespaces, ns) {
				refused = append(refused, fmt.Sprintf("%s names %s: a bootstrap never binds the agent's rights in %s",
					strings.Join(p, "."), ns, strings.Join(protectedNamespaces, ", ")))
			}
		}
	}
	return refused
}

// namespacesAt returns the strings of the list at path in values.
func namespacesAt(values map[string]any, path []string) []string {
	var v any = values
	for _, seg := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[seg]
	}
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, item := range list {
		if s, ok := item.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func orNone(list []string) string {
	if len(list) == 0 {
		return "none"
	}
	return strings.Join(list, ",")
}
