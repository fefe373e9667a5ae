// Package pipeline holds the Pipeline reconciler: it resolves every
// environment's targets to their ReleaseHistories (watched through a field
// index, so a release change reaches its pipelines at once), writes where
// each environment stands, detects rollback holds, and decides promotions:
// when every target of environment N runs version V healthy for the soak
// time and V is newer than what environment N+1 runs, it creates the one
// Promotion for (pipeline, N+1, V). It also prunes finished Promotions
// beyond the Pipeline's history limit.
//
// It does not carry out promotions; controllers/promotion does.
package pipeline
