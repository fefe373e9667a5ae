package app

import (
	"os"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/spf13/pflag"

	"tugboat.dev/tugboat/agent"
)

func TestApplyEnv_fillsWhatTheCommandLineLeftUnset(t *testing.T) {
	g := NewWithT(t)
	opts := agent.NewOptions()
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	opts.BindFlags(fs)
	g.Expect(fs.Parse([]string{"--spoke", "from-flag"})).To(Succeed())
	env := map[string]string{
		"TUGBOAT_SPOKE":                "from-env", // the flag wins
		"TUGBOAT_HUB_URL":              "https://hub.example.com",
		"TUGBOAT_HUB_KEY_FILE":         "/etc/tugboat/key/key",
		"TUGBOAT_WATCH_NAMESPACES":     "team-a,team-b",
		"TUGBOAT_WEBHOOK_BIND_ADDRESS": ":10443",
		"TUGBOAT_WEBHOOK_CERT_DIR":     "/certs",
		"TUGBOAT_BACKFILL":             "false",
		"TUGBOAT_BACKFILL_INTERVAL":    "90s",
		"UNRELATED":                    "x",
	}
	g.Expect(applyEnv(fs, func(k string) (string, bool) { v, ok := env[k]; return v, ok })).To(Succeed())
	g.Expect(opts.Reporter.Spoke).To(Equal("from-flag"))
	g.Expect(opts.Reporter.HubURL).To(Equal("https://hub.example.com"))
	g.Expect(opts.Reporter.KeyFile).To(Equal("/etc/tugboat/key/key"))
	g.Expect(opts.WatchNamespaces).To(Equal([]string{"team-a", "team-b"}))
	g.Expect(opts.Webhook.BindAddress).To(Equal(":10443"))
	g.Expect(opts.Webhook.CertDir).To(Equal("/certs"))
	g.Expect(opts.Backfill).To(BeFalse())
	g.Expect(opts.BackfillInterval.String()).To(Equal("1m30s"))
	g.Expect(opts.Validate()).To(Succeed())
}

func TestApplyEnv_namesTheVariableWithABadValue(t *testing.T) {
	g := NewWithT(t)
	opts := agent.NewOptions()
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	opts.BindFlags(fs)
	g.Expect(fs.Parse(nil)).To(Succeed())
	env := map[string]string{"TUGBOAT_BACKFILL_INTERVAL": "soon", "TUGBOAT_BACKFILL_RATE": "fast"}
	err := applyEnv(fs, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	g.Expect(err).To(MatchError(ContainSubstring(`TUGBOAT_BACKFILL_INTERVAL="soon" (flag --backfill-interval)`)))
	g.Expect(err).To(MatchError(ContainSubstring(`TUGBOAT_BACKFILL_RATE="fast" (flag --backfill-rate)`)))
}

func TestAgentCommand_readsTheEnvironment(t *testing.T) {
	g := NewWithT(t)
	t.Setenv("TUGBOAT_SPOKE", "Not_A_Label")
	t.Setenv("TUGBOAT_HUB_URL", "https://hub.example.com")
	t.Setenv("TUGBOAT_HUB_KEY_FILE", "/k")
	cmd := newAgentCommand()
	cmd.SetArgs(nil)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	// Validation runs before any cluster is reached: the spoke name from
	// the environment is refused by name.
	g.Expect(cmd.Execute()).To(MatchError(ContainSubstring(`--spoke "Not_A_Label"`)))
	g.Expect(cmd.Long).To(ContainSubstring("TUGBOAT_HUB_URL"))
}

// TestAgentDocs_listEveryFlag keeps docs/agent.md true: every flag of
// `tugboat agent` is documented there.
func TestAgentDocs_listEveryFlag(t *testing.T) {
	g := NewWithT(t)
	data, err := os.ReadFile("../../../docs/agent.md")
	g.Expect(err).NotTo(HaveOccurred())
	doc := string(data)
	newAgentCommand().Flags().VisitAll(func(f *pflag.Flag) {
		if f.Name == "help" {
			return
		}
		g.Expect(doc).To(ContainSubstring("`--"+f.Name+"`"), "docs/agent.md does not document --%s", f.Name)
	})
}
