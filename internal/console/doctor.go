package console

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/samsa-streaming/samsa/internal/cli"
)

// maxDoctorWindow bounds how long the Doctor page may sample groups.
const maxDoctorWindow = time.Minute

// doctorData is the Doctor page: `samsa doctor`'s findings.
type doctorData struct {
	Window   string
	Topics   int
	Groups   int
	Skipped  []string
	Findings []findingRow
}

type findingRow struct {
	cli.Finding
	About   string // group, topic and partitions, in words
	Numbers string // name=value …
}

func (s *Server) doctor(w http.ResponseWriter, r *http.Request) {
	window := time.Duration(0)
	if v := r.URL.Query().Get("window"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > maxDoctorWindow {
			s.fail(w, http.StatusBadRequest, "Doctor", fmt.Errorf("window: %q is not a duration between 0s and %s", v, maxDoctorWindow))
			return
		}
		window = d
	}
	ctx, cancel := context.WithTimeout(r.Context(), window+s.cfg.Timeout)
	defer cancel()
	snap, skipped, err := cli.Collect(ctx, s.adm, s.cfg.Brokers, s.cfg.Timeout, window)
	if err != nil {
		s.fail(w, http.StatusBadGateway, "Doctor", err)
		return
	}
	d := doctorData{Window: window.String(), Topics: len(snap.Topics), Groups: len(snap.Groups), Skipped: skipped}
	for _, f := range cli.Diagnose(snap) {
		d.Findings = append(d.Findings, findingRow{Finding: f, About: findingAbout(f), Numbers: findingNumbers(f)})
	}
	s.render(w, http.StatusOK, "doctor", page{Title: "Doctor", Nav: "doctor", Data: d})
}

func findingAbout(f cli.Finding) string {
	var about []string
	if f.Group != "" {
		about = append(about, fmt.Sprintf("group %q", f.Group))
	}
	if f.Topic != "" {
		about = append(about, fmt.Sprintf("topic %q", f.Topic))
	}
	switch len(f.Partitions) {
	case 0:
	case 1:
		about = append(about, "partition "+joinInt32s(f.Partitions))
	default:
		about = append(about, "partitions "+joinInt32s(f.Partitions))
	}
	return strings.Join(about, ", ")
}

func findingNumbers(f cli.Finding) string {
	var nums []string
	for _, k := range keys(f.Numbers) {
		nums = append(nums, fmt.Sprintf("%s=%d", k, f.Numbers[k]))
	}
	return strings.Join(nums, " ")
}
