// Package interactions serves POST /v1/slack/interactions: the Approve and
// Reject buttons of the Slack notifier's messages.
//
// A click is taken only when Slack's request signature verifies (v0 HMAC
// over "v0:timestamp:body" with the signing secret of the Slack notifier
// that posted the message, named with its Pipeline by the button's value,
// and the Promotion is that Pipeline's; timestamps within 5 minutes,
// constant-time comparison), was not seen before by this process (replays
// are refused by the signature's bytes),
// and comes from a Slack user the destination environment lists in
// gates.approvers.slackUsers. The vote is recorded under the verified
// Slack user ID, never under a name the payload could choose, and the
// message is updated through the interaction's response_url. Slack wants an
// answer within 3 seconds: the handler bounds its own work to less.
//
// It is not the Slack notifier (controllers/notify/slack).
package interactions
