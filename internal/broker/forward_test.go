package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFailedResponseAnswersEveryItem checks that when no active controller answers a
// forwarded request in time, the client gets REQUEST_TIMED_OUT (retriable) for every
// item it sent, for each forwarded API: an answer without its items (as CreateAcls,
// DeleteAcls, AlterClientQuotas and AlterUserScramCredentials got) leaves the client
// without an outcome for them — Kafka answers every item (the request's
// getErrorResponse).
func TestFailedResponseAnswersEveryItem(t *testing.T) {
	code := kerr.RequestTimedOut.Code

	createACLs := kmsg.NewPtrCreateACLsRequest()
	createACLs.Creations = make([]kmsg.CreateACLsRequestCreation, 2)
	resp := failedResponse(createACLs, code, "no controller").(*kmsg.CreateACLsResponse)
	if len(resp.Results) != 2 || resp.Results[0].ErrorCode != code || resp.Results[1].ErrorCode != code {
		t.Errorf("CreateAcls: results %+v, want 2 with REQUEST_TIMED_OUT", resp.Results)
	}

	deleteACLs := kmsg.NewPtrDeleteACLsRequest()
	deleteACLs.Filters = make([]kmsg.DeleteACLsRequestFilter, 3)
	dresp := failedResponse(deleteACLs, code, "no controller").(*kmsg.DeleteACLsResponse)
	if len(dresp.Results) != 3 || dresp.Results[2].ErrorCode != code {
		t.Errorf("DeleteAcls: results %+v, want 3 with REQUEST_TIMED_OUT", dresp.Results)
	}

	quotas := kmsg.NewPtrAlterClientQuotasRequest()
	e := kmsg.NewAlterClientQuotasRequestEntry()
	ent := kmsg.NewAlterClientQuotasRequestEntryEntity()
	ent.Type, ent.Name = "user", kmsg.StringPtr("alice")
	e.Entity = append(e.Entity, ent)
	quotas.Entries = append(quotas.Entries, e)
	qresp := failedResponse(quotas, code, "no controller").(*kmsg.AlterClientQuotasResponse)
	if len(qresp.Entries) != 1 || qresp.Entries[0].ErrorCode != code ||
		len(qresp.Entries[0].Entity) != 1 || qresp.Entries[0].Entity[0].Type != "user" || *qresp.Entries[0].Entity[0].Name != "alice" {
		t.Errorf("AlterClientQuotas: entries %+v, want alice's with REQUEST_TIMED_OUT", qresp.Entries)
	}

	scram := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	del := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
	del.Name = "alice"
	up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	up.Name = "bob"
	up2 := up
	scram.Deletions = append(scram.Deletions, del)
	scram.Upsertions = append(scram.Upsertions, up, up2)
	sresp := failedResponse(scram, code, "no controller").(*kmsg.AlterUserSCRAMCredentialsResponse)
	users := map[string]int16{}
	for _, r := range sresp.Results {
		users[r.User] = r.ErrorCode
	}
	if len(sresp.Results) != 2 || users["alice"] != code || users["bob"] != code {
		t.Errorf("AlterUserScramCredentials: results %+v, want alice and bob once each with REQUEST_TIMED_OUT", sresp.Results)
	}
}
