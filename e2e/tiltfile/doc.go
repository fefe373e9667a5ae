// Package tiltfile checks the repository's Tiltfile without Tilt, which
// cannot be built here: its tests run the Tiltfile with the Starlark
// interpreter Tilt uses (go.starlark.net), against stand-ins of the Tilt
// functions it calls that record what it wires up (images, manifests,
// resources, port-forwards, local commands), render the real kustomize
// bases, and run the commands of its no-Docker mode.
//
// What it cannot check is Tilt's own behavior: rebuild triggers, live
// updates and the order Tilt applies objects in.
package tiltfile
