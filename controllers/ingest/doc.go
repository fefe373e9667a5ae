// Package ingest holds what the hub's ingest path carries from the
// receiver (webhook/receiver) to the domain that records what spokes send
// (controllers/releasehistory) and hands out agent actions
// (controllers/promotion/actions): the Spoke a request was authenticated
// as, as an explicit value.
//
// It lives with the domain, so the domain never imports webhook for it. It
// is not the receiver's Store or directory interfaces (they still live in
// webhook/receiver) and holds no keys.
package ingest
