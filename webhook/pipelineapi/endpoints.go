package pipelineapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	sigsjson "sigs.k8s.io/json"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/controllers/promotion"
	"tugboat.dev/tugboat/controllers/promotion/request"
)

// PromotionRequest is the body of POST .../promotions.
type PromotionRequest struct {
	// Environment is the environment to promote into. Required.
	Environment string `json:"environment"`
	// Version is the chart version to promote. Required.
	Version string `json:"version"`
	// Requester identifies the caller, e.g. a CI job URL. Optional.
	Requester string `json:"requester,omitempty"`
}

// PromotionResponse answers POST .../promotions.
type PromotionResponse struct {
	// Promotion is the name of the Promotion created or found.
	Promotion string `json:"promotion"`
	// Phase is its phase when it already existed.
	Phase tugboatv1alpha1.PromotionPhase `json:"phase,omitempty"`
}

// ApprovalRequest is the body of POST .../approvals. Who decides is not in
// the body: it is the approval credential that authenticated the request.
type ApprovalRequest struct {
	// Promotion is the name of a Promotion of this Pipeline. Required.
	Promotion string `json:"promotion"`
	// Approve is true to approve, false to reject. Required.
	Approve *bool `json:"approve"`
	// Message is a comment. Optional.
	Message string `json:"message,omitempty"`
}

// ApprovalResponse answers POST .../approvals.
type ApprovalResponse struct {
	// Promotion is the Promotion's name.
	Promotion string `json:"promotion"`
	// Decision is "approved" or "rejected": the credential's vote as
	// recorded (the first one stands when the same is sent twice).
	Decision string `json:"decision"`
	// DecidedBy is the name of the approval credential, as recorded.
	DecidedBy string `json:"decidedBy"`
	// Gate says where the approval gate stands after the vote, e.g. "1 of 2
	// approvals (release-bot)"; the hub starts or aborts the Promotion.
	Gate string `json:"gate"`
}

func (h *Handler) servePromotion(ctx context.Context, c *call, p *tugboatv1alpha1.Pipeline, body []byte) {
	var req PromotionRequest
	if fe := decodeStrict(body, &req, map[string]string{"environment": "string", "version": "string", "requester": "string"}); fe != nil {
		c.invalid(*fe)
		return
	}
	pr, created, err := request.Ensure(ctx, h.client, p, req.Environment, req.Version, tugboatv1alpha1.RequestedByCI, req.Requester)
	if err != nil {
		h.outcome(c, err)
		return
	}
	h.log.Info("Promotion requested by CI", "pipeline", c.namespace+"/"+c.pipeline, "promotion", pr.Name,
		"environment", req.Environment, "version", req.Version, "requester", req.Requester, "created", created)
	if created {
		c.respond(http.StatusCreated, PromotionResponse{Promotion: pr.Name})
		return
	}
	c.respond(http.StatusOK, PromotionResponse{Promotion: pr.Name, Phase: pr.Status.Phase})
}

func (h *Handler) serveApproval(ctx context.Context, c *call, p *tugboatv1alpha1.Pipeline, credential string, body []byte) {
	var req ApprovalRequest
	if fe := decodeStrict(body, &req, map[string]string{"promotion": "string", "approve": "boolean", "message": "string"}); fe != nil {
		if fe.Field == "approver" {
			fe.Detail = "no longer accepted: the decision is recorded under the name of the approval credential that authenticated the request"
		}
		c.invalid(*fe)
		return
	}
	switch {
	case req.Promotion == "":
		c.invalid(wire.FieldError{Field: "promotion", Detail: "required"})
		return
	case len(req.Promotion) > 253 || len(validation.IsDNS1123Subdomain(req.Promotion)) > 0:
		c.invalid(wire.FieldError{Field: "promotion", Detail: "not a valid Promotion name"})
		return
	case req.Approve == nil:
		c.invalid(wire.FieldError{Field: "approve", Detail: "required: true to approve, false to reject"})
		return
	}
	pr, err := request.GetPromotion(ctx, h.reader, c.namespace, req.Promotion)
	if err == nil && pr.Spec.Pipeline != c.pipeline {
		// Another Pipeline's Promotion: its credentials do not cover it,
		// and its existence is not this caller's business.
		err = &request.NotFoundError{Kind: "promotion", Namespace: c.namespace, Name: req.Promotion}
	}
	if err != nil {
		h.outcome(c, err)
		return
	}
	vote := tugboatv1alpha1.ApprovalVote{Decision: tugboatv1alpha1.DecisionReject, User: credential, Source: tugboatv1alpha1.ApprovalSourceCI, Message: req.Message}
	if *req.Approve {
		vote.Decision = tugboatv1alpha1.DecisionApprove
	}
	pr, err = request.Decide(ctx, h.client, c.namespace, req.Promotion, vote)
	if err != nil {
		h.outcome(c, err)
		return
	}
	// Decide took the vote, or found the same decision of the same person
	// already recorded (maybe through another identity, when
	// gates.approvers.people declares the credential to be someone).
	resp := ApprovalResponse{Promotion: pr.Name, Decision: "approved", DecidedBy: credential, Gate: request.Count(p, pr).Summary()}
	if vote.Decision == tugboatv1alpha1.DecisionReject {
		resp.Decision = "rejected"
	}
	h.log.Info("Promotion decided by CI", "pipeline", c.namespace+"/"+c.pipeline, "promotion", pr.Name, "decision", resp.Decision, "credential", credential)
	c.respond(http.StatusOK, resp)
}

// outcome answers an error of the request package.
func (h *Handler) outcome(c *call, err error) {
	var inv *request.InvalidError
	switch {
	case errors.As(err, &inv):
		c.invalid(wire.FieldError{Field: inv.Field, Detail: inv.Detail})
	case errors.Is(err, request.ErrNotFound):
		c.fail(http.StatusNotFound, err.Error())
	case errors.Is(err, request.ErrNotWaiting), errors.Is(err, promotion.ErrStaleDelivery), errors.Is(err, promotion.ErrNotAwaitingReport):
		c.fail(http.StatusConflict, err.Error())
	case errors.Is(err, request.ErrNotAllowed):
		c.fail(http.StatusForbidden, err.Error())
	default:
		h.log.Error(err, "Pipeline API request failed", "pipeline", c.namespace+"/"+c.pipeline, "endpoint", c.endpoint)
		c.fail(http.StatusInternalServerError, "internal error: the hub's log has the details")
	}
}

func (c *call) invalid(fe wire.FieldError) {
	c.respond(http.StatusBadRequest, wire.NewErrorResponse(&wire.InvalidError{Errors: []wire.FieldError{fe}}))
}

// decodeStrict decodes body, which must be one JSON object, into v: keys
// match case-sensitively, unknown and duplicate keys are refused, and so is
// anything after the object. types names the JSON type of each field, to
// name the field of a type mismatch.
func decodeStrict(body []byte, v any, types map[string]string) *wire.FieldError {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return &wire.FieldError{Detail: "body must be a JSON object"}
	}
	strict, err := sigsjson.UnmarshalStrict(body, v)
	if err != nil {
		if syntax, off := sigsjson.SyntaxErrorOffset(err); syntax {
			return &wire.FieldError{Detail: fmt.Sprintf("malformed JSON at offset %d", off)}
		}
		var generic map[string]any
		if sigsjson.UnmarshalCaseSensitivePreserveInts(body, &generic) == nil {
			for _, field := range slices.Sorted(maps.Keys(types)) {
				if val, ok := generic[field]; ok && val != nil && jsonType(val) != types[field] {
					return &wire.FieldError{Field: field, Detail: "must be a " + types[field]}
				}
			}
		}
		return &wire.FieldError{Detail: "malformed JSON"}
	}
	if len(strict) > 0 {
		var fe sigsjson.FieldError
		if errors.As(strict[0], &fe) {
			detail := "unknown field"
			if strings.Contains(fe.Error(), "duplicate") {
				detail = "duplicate field"
			}
			return &wire.FieldError{Field: fe.FieldPath(), Detail: detail}
		}
		return &wire.FieldError{Detail: strict[0].Error()}
	}
	return nil
}

func jsonType(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case bool:
		return "boolean"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	default:
		return "number"
	}
}
