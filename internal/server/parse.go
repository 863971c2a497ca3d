package server

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// apiVersionsKey is the ApiVersions api key, whose version errors get an answer.
const apiVersionsKey int16 = 18

// errCodeUnsupportedVersion is Kafka's UNSUPPORTED_VERSION error code.
const errCodeUnsupportedVersion int16 = 35

// Frame decoding failures. Each closes the connection, except errUnsupportedVersion on
// ApiVersions.
var (
	errTruncatedHeader    = errors.New("truncated request header")
	errUnknownAPIKey      = errors.New("unknown api key")
	errUnsupportedVersion = errors.New("unsupported api version")
	errMalformedBody      = errors.New("malformed request body")
)

// versionsFunc reports the served version range of an api key.
type versionsFunc func(key int16) (min, max int16, ok bool)

// parsedRequest is a decoded request frame.
type parsedRequest struct {
	key           int16
	version       int16
	correlationID int32
	clientID      string
	// body is nil when err is errUnsupportedVersion.
	body kmsg.Request
}

// parseRequest decodes one request frame (without its size prefix). On error the
// returned request carries whatever header fields were decoded (key, version and
// correlation id once the first 8 bytes are present), which the caller needs to log
// and to answer an unsupported ApiVersions version. It never panics on any input.
func parseRequest(frame []byte, versions versionsFunc) (req parsedRequest, err error) {
	return parseRequestWith(frame, versions, kmsg.RequestForKey)
}

// parseRequestWith is parseRequest with the constructor of empty request bodies
// (Config.NewRequest).
func parseRequestWith(frame []byte, versions versionsFunc, newRequest func(key int16) kmsg.Request) (req parsedRequest, err error) {
	if len(frame) < 10 {
		return req, fmt.Errorf("%w: %d bytes", errTruncatedHeader, len(frame))
	}
	req.key = int16(binary.BigEndian.Uint16(frame[0:]))
	req.version = int16(binary.BigEndian.Uint16(frame[2:]))
	req.correlationID = int32(binary.BigEndian.Uint32(frame[4:]))
	clientIDLen := int16(binary.BigEndian.Uint16(frame[8:]))
	rest := frame[10:]
	switch {
	case clientIDLen < -1:
		return req, fmt.Errorf("%w: client id length %d", errTruncatedHeader, clientIDLen)
	case clientIDLen > 0:
		if int(clientIDLen) > len(rest) {
			return req, fmt.Errorf("%w: client id of %d bytes, %d left", errTruncatedHeader, clientIDLen, len(rest))
		}
		req.clientID = string(rest[:clientIDLen])
		rest = rest[clientIDLen:]
	}

	body := newRequest(req.key)
	if body == nil {
		return req, fmt.Errorf("%w %d", errUnknownAPIKey, req.key)
	}
	minVersion, maxVersion, served := versions(req.key)
	if !served || req.version < minVersion || req.version > maxVersion || req.version < 0 || req.version > body.MaxVersion() {
		return req, fmt.Errorf("%w: key %d version %d (served: %t, %d..%d)", errUnsupportedVersion, req.key, req.version, served, minVersion, maxVersion)
	}
	body.SetVersion(req.version)
	if body.IsFlexible() {
		if rest, err = skipTaggedFields(rest); err != nil {
			return req, err
		}
	}
	if err := body.ReadFrom(rest); err != nil {
		return req, fmt.Errorf("%w: key %d version %d: %v", errMalformedBody, req.key, req.version, err)
	}
	req.body = body
	return req, nil
}

// skipTaggedFields skips a KIP-482 tagged field buffer: a uvarint count, then for each
// field a uvarint tag, a uvarint size and that many bytes. The request header defines
// no tags, so every field is skipped.
func skipTaggedFields(b []byte) ([]byte, error) {
	count, b, err := readUvarint(b)
	if err != nil {
		return nil, err
	}
	for i := uint64(0); i < count; i++ {
		if _, b, err = readUvarint(b); err != nil { // tag
			return nil, err
		}
		var size uint64
		if size, b, err = readUvarint(b); err != nil {
			return nil, err
		}
		if size > uint64(len(b)) {
			return nil, fmt.Errorf("%w: tagged field of %d bytes, %d left", errTruncatedHeader, size, len(b))
		}
		b = b[size:]
	}
	return b, nil
}

func readUvarint(b []byte) (uint64, []byte, error) {
	v, n := binary.Uvarint(b)
	if n <= 0 || v > 1<<31 {
		return 0, nil, fmt.Errorf("%w: bad tagged field varint", errTruncatedHeader)
	}
	return v, b[n:], nil
}
