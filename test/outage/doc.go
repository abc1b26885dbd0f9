// Package outage tests Virtstation's failure domain on its own control
// plane: with the webhook server stopped, the API server still lets
// KubeVirt finish its work on managed VMs (finalizers, annotations), while
// changes to a managed VM's spec are refused (fail closed).
package outage
