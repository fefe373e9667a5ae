package hub

import (
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/promotion/strategy"
	"tugboat.dev/tugboat/controllers/promotion/strategy/helm"
	"tugboat.dev/tugboat/controllers/promotion/strategy/kubernetes"
	"tugboat.dev/tugboat/controllers/promotion/strategy/notification"
	"tugboat.dev/tugboat/controllers/promotion/strategy/pullrequest"
	"tugboat.dev/tugboat/controllers/promotion/strategy/spokeaccess"
	"tugboat.dev/tugboat/controllers/promotion/strategy/webhook"
)

// DefaultStrategies returns the promotion strategies this hub offers, one
// instance each for the life of the process (the kubernetes strategy caches
// spoke clients).
func DefaultStrategies(mgr ctrl.Manager, opts Options) strategy.Registry {
	// go-git's transport is process-wide: git reaches repositories through
	// the egress policy too.
	pullrequest.InstallGitTransport(opts.Egress.Client(0))
	return strategy.Registry{
		tugboatv1alpha1.StrategyKubernetes: kubernetes.New(spokeaccess.NewCache(nil).WithEgress(opts.Egress)),
		tugboatv1alpha1.StrategyHelm:       helm.New(),
		tugboatv1alpha1.StrategyWebhook:    webhook.New(opts.Egress.Client(30 * time.Second)),
		tugboatv1alpha1.StrategyPullRequest: pullrequest.New(mgr.GetAPIReader(),
			pullrequest.WithHTTPClient(opts.Egress.Client(30*time.Second)), pullrequest.WithAllowHTTP(opts.PullRequestAllowHTTP)),
		tugboatv1alpha1.StrategyNotification: notification.New(notification.Options{DefaultAddress: opts.NotificationControllerAddress, HTTPClient: opts.Egress.Client(10 * time.Second)}),
	}
}
