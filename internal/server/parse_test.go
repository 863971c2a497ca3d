package server

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// everyKmsgVersion serves every key and version kmsg knows.
func everyKmsgVersion(key int16) (int16, int16, bool) {
	r := kmsg.RequestForKey(key)
	if r == nil {
		return 0, 0, false
	}
	return 0, r.MaxVersion(), true
}

func TestParseRequest(t *testing.T) {
	unframe := func(b []byte) []byte { return b[4:] }
	withTags := func() []byte {
		// Heartbeat v4 with a header tag buffer holding two unknown tags.
		b := binary.BigEndian.AppendUint16(nil, 12)
		b = binary.BigEndian.AppendUint16(b, 4)
		b = binary.BigEndian.AppendUint32(b, 9)
		b = binary.BigEndian.AppendUint16(b, 2)
		b = append(b, "id"...)
		b = append(b, 2, 0, 3, 'a', 'b', 'c', 5, 0)
		return (&kmsg.HeartbeatRequest{Version: 4, Group: "grp", Generation: 3}).AppendTo(b)
	}
	nullClientID := func() []byte {
		b := binary.BigEndian.AppendUint16(nil, 12)
		b = binary.BigEndian.AppendUint16(b, 0)
		b = binary.BigEndian.AppendUint32(b, 1)
		b = binary.BigEndian.AppendUint16(b, 0xffff)
		return (&kmsg.HeartbeatRequest{Group: "grp", Generation: 3}).AppendTo(b)
	}
	tests := []struct {
		name     string
		frame    []byte
		versions versionsFunc
		wantErr  error
		want     parsedRequest // body checked separately
		group    string        // Heartbeat group expected in the body
	}{
		{
			name:  "heartbeat v0",
			frame: unframe(encodeRequest(&kmsg.HeartbeatRequest{Group: "grp", Generation: 3}, 0, 42, "me")),
			want:  parsedRequest{key: 12, version: 0, correlationID: 42, clientID: "me"},
			group: "grp",
		},
		{
			name:  "flexible header with tags skipped",
			frame: withTags(),
			want:  parsedRequest{key: 12, version: 4, correlationID: 9, clientID: "id"},
			group: "grp",
		},
		{
			name:  "null client id",
			frame: nullClientID(),
			want:  parsedRequest{key: 12, version: 0, correlationID: 1},
			group: "grp",
		},
		{
			name:     "version above served range",
			frame:    unframe(encodeRequest(&kmsg.HeartbeatRequest{}, 4, 5, "")),
			versions: func(int16) (int16, int16, bool) { return 0, 3, true },
			wantErr:  errUnsupportedVersion,
			want:     parsedRequest{key: 12, version: 4, correlationID: 5},
		},
		{
			name:     "version below served range",
			frame:    unframe(encodeRequest(&kmsg.HeartbeatRequest{}, 0, 5, "")),
			versions: func(int16) (int16, int16, bool) { return 1, 4, true },
			wantErr:  errUnsupportedVersion,
			want:     parsedRequest{key: 12, version: 0, correlationID: 5},
		},
		{
			name:     "served range beyond what kmsg can decode",
			frame:    []byte{0, 12, 0, 50, 0, 0, 0, 5, 0, 0},
			versions: func(int16) (int16, int16, bool) { return 0, 100, true },
			wantErr:  errUnsupportedVersion,
			want:     parsedRequest{key: 12, version: 50, correlationID: 5},
		},
		{
			name:    "unknown key",
			frame:   []byte{0x7f, 0, 0, 0, 0, 0, 0, 5, 0, 0},
			wantErr: errUnknownAPIKey,
			want:    parsedRequest{key: 0x7f00, correlationID: 5},
		},
		{name: "short header", frame: []byte{0, 12, 0, 0, 0, 0, 0, 1, 0}, wantErr: errTruncatedHeader},
		{
			name:    "client id length below -1",
			frame:   []byte{0, 12, 0, 0, 0, 0, 0, 1, 0xff, 0xfe},
			wantErr: errTruncatedHeader,
			want:    parsedRequest{key: 12, correlationID: 1},
		},
		{
			name:    "truncated body",
			frame:   unframe(encodeRequest(&kmsg.HeartbeatRequest{Group: "grp"}, 0, 5, ""))[:13],
			wantErr: errMalformedBody,
			want:    parsedRequest{key: 12, correlationID: 5},
		},
		{
			name:    "tag longer than frame",
			frame:   []byte{0, 12, 0, 4, 0, 0, 0, 1, 0xff, 0xff, 1, 0, 100},
			wantErr: errTruncatedHeader,
			want:    parsedRequest{key: 12, version: 4, correlationID: 1},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			versions := tc.versions
			if versions == nil {
				versions = everyKmsgVersion
			}
			got, err := parseRequest(tc.frame, versions)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			body := got.body
			got.body = nil
			if got != tc.want {
				t.Fatalf("parsed %+v, want %+v", got, tc.want)
			}
			if tc.wantErr != nil {
				if body != nil {
					t.Fatalf("body %T returned with an error", body)
				}
				return
			}
			hb, ok := body.(*kmsg.HeartbeatRequest)
			if !ok || hb.Group != tc.group || hb.GetVersion() != tc.want.version {
				t.Fatalf("body %+v", body)
			}
		})
	}
}

// FuzzReadRequest feeds arbitrary frames to the frame/header decoder: it must never
// panic, and a frame it accepts must re-encode to bytes it decodes to the same bytes.
func FuzzReadRequest(f *testing.F) {
	seeds := []struct {
		req     kmsg.Request
		version int16
	}{
		{kmsg.NewPtrApiVersionsRequest(), 0},
		{&kmsg.ApiVersionsRequest{ClientSoftwareName: "x", ClientSoftwareVersion: "1"}, 3},
		{&kmsg.HeartbeatRequest{Group: "g", MemberID: "m"}, 4},
		{&kmsg.MetadataRequest{Topics: []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("t")}}}, 12},
		{&kmsg.ProduceRequest{Acks: -1, TimeoutMillis: 1000, Topics: []kmsg.ProduceRequestTopic{{Topic: "t", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: []byte{1, 2, 3}}}}}}, 9},
		{&kmsg.FetchRequest{MaxWaitMillis: 500, Topics: []kmsg.FetchRequestTopic{{Topic: "t", Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 1}}}}}, 12},
		{&kmsg.JoinGroupRequest{Group: "g", ProtocolType: "consumer"}, 7},
	}
	for _, s := range seeds {
		f.Add(encodeRequest(s.req, s.version, 1, "seed")[4:])
	}
	f.Add([]byte{})
	f.Add([]byte{0, 12, 0, 4, 0, 0, 0, 1, 0xff, 0xff, 1, 0, 100})
	f.Fuzz(func(t *testing.T, frame []byte) {
		req, err := parseRequest(frame, everyKmsgVersion)
		if err != nil {
			if req.body != nil {
				t.Fatal("body returned with an error")
			}
			return
		}
		if req.body == nil || req.body.Key() != req.key || req.body.GetVersion() != req.version {
			t.Fatalf("inconsistent request %+v", req)
		}
		first := encodeRequest(req.body, req.version, req.correlationID, req.clientID)
		again, err := parseRequest(first[4:], everyKmsgVersion)
		if err != nil {
			t.Fatalf("re-encoded frame does not decode: %v", err)
		}
		second := encodeRequest(again.body, again.version, again.correlationID, again.clientID)
		if !bytes.Equal(first, second) {
			t.Fatalf("encoding is not stable:\n%x\n%x", first, second)
		}
	})
}
