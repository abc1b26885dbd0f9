package mutate

// ReasonInjected is the Event reason for a VM the webhook mutated. The
// webhook cannot emit the Event itself (on CREATE the VM has no UID yet);
// package report's Reporter does, from the virtstation.io/injected record.
const ReasonInjected = "Injected"
