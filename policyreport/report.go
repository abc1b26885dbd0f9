package policyreport

import (
	"encoding/json"
	"fmt"
	"sort"

	orv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
)

// ReportName is the name of a namespace's report. A namespace whose results
// do not fit in one object gets more, named ReportName-2, ReportName-3, ….
const ReportName = "virtstation-policy"

// MaxReportBytes bounds the results of one report, as JSON. etcd stores
// objects of up to 1.5 MiB by default; the rest is left for metadata. With
// results bounded by maxMessageBytes and maxFieldBytes, one report holds a
// few thousand passing results or several hundred failing ones.
const MaxReportBytes = 1000 * 1000

// Report is one report's content.
type Report struct {
	Namespace, Name string
	// Results are sorted by VM name, then rule.
	Results []Result
	Summary orv1alpha1.ReportSummary
}

// Build sorts a namespace's results (by VM name, then rule) into reports of
// at most MaxReportBytes of results each, never splitting one VM's results
// across two, and summarises each. It returns nil when there are no
// results: a namespace without managed VMs has no report.
func Build(namespace string, results []Result) []Report {
	if len(results) == 0 {
		return nil
	}
	sorted := append([]Result(nil), results...)
	sort.SliceStable(sorted, func(i, j int) bool {
		a, b := subjectName(sorted[i]), subjectName(sorted[j])
		if a != b {
			return a < b
		}
		return sorted[i].Rule < sorted[j].Rule
	})
	var out []Report
	cur := Report{Namespace: namespace, Name: ReportName}
	size := 0
	for start := 0; start < len(sorted); {
		end := start + 1
		for end < len(sorted) && subjectName(sorted[end]) == subjectName(sorted[start]) {
			end++
		}
		vm := sorted[start:end]
		n := resultsBytes(vm)
		if size > 0 && size+n > MaxReportBytes {
			out = append(out, cur.summarised())
			cur = Report{Namespace: namespace, Name: fmt.Sprintf("%s-%d", ReportName, len(out)+1)}
			size = 0
		}
		cur.Results = append(cur.Results, vm...)
		size += n
		start = end
	}
	return append(out, cur.summarised())
}

func (r Report) summarised() Report {
	r.Summary = Summarise(r.Results)
	return r
}

// Summarise counts results by their value.
func Summarise(results []Result) orv1alpha1.ReportSummary {
	var s orv1alpha1.ReportSummary
	for _, r := range results {
		switch r.Result {
		case Pass:
			s.Pass++
		case Fail:
			s.Fail++
		case Warn:
			s.Warn++
		case Error:
			s.Error++
		default:
			s.Skip++
		}
	}
	return s
}

// subjectName is the name of the VM a result is about.
func subjectName(r Result) string {
	if len(r.Subjects) == 0 {
		return ""
	}
	return r.Subjects[0].Name
}

// resultsBytes is the JSON size of results.
func resultsBytes(rs []Result) int {
	n := 0
	for i := range rs {
		b, err := json.Marshal(&rs[i])
		if err != nil {
			// A Result of strings and maps always encodes; count it as large.
			return MaxReportBytes
		}
		n += len(b) + 1
	}
	return n
}
