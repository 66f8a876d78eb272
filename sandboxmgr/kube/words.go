package kube

import "github.com/previewgate/previewgate/sandboxmgr/runtime"

// validID reports a valid sandbox id.
func validID(id string) bool {
	_, ok := runtime.SandboxOf(runtime.ContainerName(id))
	return ok
}
