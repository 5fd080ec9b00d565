package main

import (
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
)

// otlpServer is the OTLP/HTTP metrics endpoint the agent exports to (its otlp_http
// exporter): protobuf or JSON, plain or gzip, as the OTLP specification allows.
type otlpServer struct {
	store *agentStore
	srv   *http.Server
	ln    net.Listener
}

// startOTLP listens on 127.0.0.1 on a free port.
func startOTLP(store *agentStore) (*otlpServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("OTLP endpoint: %w", err)
	}
	s := &otlpServer{store: store, ln: ln}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/metrics", s.handle)
	s.srv = &http.Server{Handler: mux}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// endpoint is the otlp_http exporter's endpoint (it appends /v1/metrics).
func (s *otlpServer) endpoint() string { return "http://" + s.ln.Addr().String() }

func (s *otlpServer) close() { _ = s.srv.Close() }

func (s *otlpServer) handle(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		defer zr.Close()
		body = zr
	}
	data, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req := pmetricotlp.NewExportRequest()
	asJSON := strings.HasPrefix(r.Header.Get("Content-Type"), "application/json")
	if asJSON {
		err = req.UnmarshalJSON(data)
	} else {
		err = req.UnmarshalProto(data)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.store.add(req.Metrics())
	resp := pmetricotlp.NewExportResponse()
	var out []byte
	if asJSON {
		w.Header().Set("Content-Type", "application/json")
		out, err = resp.MarshalJSON()
	} else {
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, err = resp.MarshalProto()
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	_, _ = w.Write(out)
}
