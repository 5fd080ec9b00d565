module github.com/open-telemetry/opentelemetry-collector-contrib/pkg/semconvtest

go 1.25
