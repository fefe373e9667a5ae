package deliver

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// notificationsTotal counts delivery attempts by notifier name, event and
// result (delivered, retry, failed, skipped).
var notificationsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "tugboat_notifications_total",
	Help: "Notification delivery attempts by notifier, event type and result (delivered, retry, failed, skipped).",
}, []string{"notifier", "type", "result"})

func init() { ctrlmetrics.Registry.MustRegister(notificationsTotal) }
