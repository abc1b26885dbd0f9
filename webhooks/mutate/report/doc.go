// Package report tells users what the mutating webhook did to their
// VirtualMachines: Reporter emits an Event (reason mutate.ReasonInjected)
// whenever a managed VM's virtstation.io/injected record changes, once the
// VM exists and can carry one. Package webhooks wires it into the manager.
package report
