package console

import (
	"net/http"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
)

// overviewData is the Overview page: the brokers and the cluster's health in numbers.
type overviewData struct {
	ClusterID       string
	Controller      int32 // -1 when unknown
	Brokers         []brokerRow
	Topics          int // user topics
	InternalTopics  int
	Partitions      int // of user topics
	UnderReplicated int // of every topic, internal ones included
	Offline         int
}

type brokerRow struct {
	ID         int32
	Host       string
	Port       int32
	Rack       string
	Controller bool
}

func (s *Server) overview(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.requestContext(r)
	defer cancel()
	md, err := s.adm.Metadata(ctx)
	if err != nil {
		s.fail(w, http.StatusBadGateway, "Overview", err)
		return
	}
	s.render(w, http.StatusOK, "overview", page{Title: "Overview", Nav: "overview", Data: buildOverview(md)})
}

// buildOverview counts what the Overview shows; it is pure.
func buildOverview(md kadm.Metadata) overviewData {
	d := overviewData{ClusterID: md.Cluster, Controller: md.Controller}
	for _, b := range md.Brokers {
		row := brokerRow{ID: b.NodeID, Host: b.Host, Port: b.Port, Controller: b.NodeID == md.Controller}
		if b.Rack != nil {
			row.Rack = *b.Rack
		}
		d.Brokers = append(d.Brokers, row)
	}
	slices.SortFunc(d.Brokers, func(a, b brokerRow) int { return int(a.ID - b.ID) })
	for _, t := range md.Topics {
		if t.IsInternal {
			d.InternalTopics++
		} else {
			d.Topics++
			d.Partitions += len(t.Partitions)
		}
		for _, p := range t.Partitions {
			switch {
			case p.Leader < 0:
				d.Offline++
			case len(p.ISR) < len(p.Replicas):
				d.UnderReplicated++
			}
		}
	}
	return d
}
