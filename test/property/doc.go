// Package property is Virtstation's property test: it admits many varied
// managed VirtualMachines (internal/vmgen) through the real mutating
// webhook handler and through render, and checks five properties of each:
//
//  1. KubeVirt v1.9.0's own VM and VMI admission (internal/kvadmission)
//     accepts whatever Virtstation admits, given that it accepted the VM
//     before Virtstation touched it;
//  2. admitting twice equals admitting once, as CREATE (reinvocation) and
//     as UPDATE;
//  3. the user's own user-data survives byte for byte;
//  4. removing the virtstation.io annotations (and labels) and admitting
//     the result as an UPDATE gives the user's VM back;
//  5. render and the webhook reach the same verdict and the same output.
//
// docs/property-test.md says how to run it at other counts and seeds.
package property
