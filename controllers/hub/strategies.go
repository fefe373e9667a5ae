package hub

import (
	ctrl "sigs.k8s.io/controller-runtime"

	"tugboat.dev/tugboat/controllers/promotion/strategy"
)

// DefaultStrategies returns the promotion strategies this hub offers.
func DefaultStrategies(mgr ctrl.Manager) strategy.Registry {
	return strategy.Registry{}
}
