package pipelineapi

import (
	"context"
	"encoding/hex"
	"net/http"
	"strconv"

	"k8s.io/apimachinery/pkg/util/validation"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/controllers/promotion"
)

// Results of a step report.
const (
	ResultSucceeded = "succeeded"
	ResultFailed    = "failed"
)

// StepReportRequest is the body of POST .../steps: the result of a webhook
// step's attempt that answered 202 Accepted. Who reports is not in the
// body: it is the credential that authenticated the request.
type StepReportRequest struct {
	// Promotion is the name of a Promotion of this Pipeline. Required.
	Promotion string `json:"promotion"`
	// Step is the name of its webhook step. Required.
	Step string `json:"step"`
	// Delivery is the attempt's X-Tugboat-Delivery id (also the id of its
	// StepRequest body). Required.
	Delivery string `json:"delivery"`
	// Result is "succeeded" or "failed". Required.
	Result string `json:"result"`
	// Message says why, at most promotion.MaxReportMessage bytes. Optional.
	Message string `json:"message,omitempty"`
}

// StepReportResponse answers POST .../steps.
type StepReportResponse struct {
	// Promotion and Step name the step reported.
	Promotion string `json:"promotion"`
	Step      string `json:"step"`
	// Result is the result as recorded.
	Result string `json:"result"`
	// ReportedBy names the credential that authenticated the report, as
	// recorded in the LifecycleEvent's message.
	ReportedBy string `json:"reportedBy"`
	// LifecycleEvent is the attempt's event, now finished; the hub
	// completes the step from it.
	LifecycleEvent string `json:"lifecycleEvent"`
}

// stepReportTypes names the JSON type of each field of StepReportRequest.
var stepReportTypes = map[string]string{"promotion": "string", "step": "string", "delivery": "string", "result": "string", "message": "string"}

// DecodeStepReport decodes and checks the body of a step report: one JSON
// object with known fields only, each of its type; promotion a Promotion's
// name, step a step's name, delivery 32 hexadecimal digits, result
// succeeded or failed, message at most promotion.MaxReportMessage bytes.
// A refused body is a FieldError naming the field.
func DecodeStepReport(body []byte) (StepReportRequest, *wire.FieldError) {
	var req StepReportRequest
	if fe := decodeStrict(body, &req, stepReportTypes); fe != nil {
		return StepReportRequest{}, fe
	}
	bad := func(field, detail string) (StepReportRequest, *wire.FieldError) {
		return StepReportRequest{}, &wire.FieldError{Field: field, Detail: detail}
	}
	switch {
	case req.Promotion == "":
		return bad("promotion", "required")
	case len(req.Promotion) > 253 || len(validation.IsDNS1123Subdomain(req.Promotion)) > 0:
		return bad("promotion", "not a valid Promotion name")
	case req.Step == "":
		return bad("step", "required")
	case len(validation.IsDNS1123Label(req.Step)) > 0:
		return bad("step", "not a valid step name (a DNS label)")
	case req.Delivery == "":
		return bad("delivery", "required: the X-Tugboat-Delivery id of the step's request")
	case !isDeliveryID(req.Delivery):
		return bad("delivery", "must be the 32 hexadecimal digits of an X-Tugboat-Delivery id")
	case req.Result != ResultSucceeded && req.Result != ResultFailed:
		return bad("result", `must be "succeeded" or "failed"`)
	case len(req.Message) > promotion.MaxReportMessage:
		return bad("message", "longer than "+strconv.Itoa(promotion.MaxReportMessage)+" bytes")
	}
	return req, nil
}

func isDeliveryID(s string) bool {
	b, err := hex.DecodeString(s)
	return err == nil && len(b) == 16 && hex.EncodeToString(b) == s
}

// reporterName is how the credential that authenticated a report is
// recorded: keySecret is the step's Secret whose key matched, empty for
// the Pipeline's request credential.
func reporterName(p *tugboatv1alpha1.Pipeline, keySecret string) string {
	if keySecret != "" {
		return "the webhook key of Secret " + keySecret
	}
	name := ""
	if p.Spec.SecretRef != nil {
		name = " (Secret " + p.Spec.SecretRef.Name + ")"
	}
	return "the request credential of pipeline " + p.Name + name
}

func (h *Handler) serveStepReport(ctx context.Context, c *call, p *tugboatv1alpha1.Pipeline, keySecret string, body []byte) {
	req, fe := DecodeStepReport(body)
	if fe != nil {
		c.invalid(*fe)
		return
	}
	reporter := reporterName(p, keySecret)
	ev, err := promotion.ReportStep(ctx, h.client, h.reader, p, promotion.StepReport{
		Namespace: c.namespace, Promotion: req.Promotion, Step: req.Step, Delivery: req.Delivery,
		Succeeded: req.Result == ResultSucceeded, Message: req.Message, Reporter: reporter, KeySecret: keySecret,
	})
	if err != nil {
		h.outcome(c, err)
		return
	}
	h.log.Info("Webhook step reported through the CI API", "pipeline", c.namespace+"/"+c.pipeline, "promotion", req.Promotion,
		"step", req.Step, "delivery", req.Delivery, "result", req.Result, "reporter", reporter)
	c.respond(http.StatusOK, StepReportResponse{Promotion: req.Promotion, Step: req.Step, Result: req.Result, ReportedBy: reporter, LifecycleEvent: ev.Name})
}
