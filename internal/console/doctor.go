package console

import (
	"context"
	"fmt"
	"net/http"
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
	Findings []cli.Finding
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
	d := doctorData{Window: window.String(), Topics: len(snap.Topics), Groups: len(snap.Groups), Skipped: skipped,
		Findings: cli.Diagnose(snap)}
	s.render(w, http.StatusOK, "doctor", page{Title: "Doctor", Nav: "doctor", Data: d})
}
