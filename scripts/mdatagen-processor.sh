#!/usr/bin/env bash
# Generates gpu_enrich's metadata package with mdatagen, metrics builder included.
#
# mdatagen v0.155 (the newest that builds here, DESIGN §3) writes the metrics builder's
# constructor, and the test that exercises it, only for receivers, scrapers and connectors.
# The processor records every metric through that builder, so its metric files are
# generated from the same metadata.yaml as if it were a receiver, with the Settings type
# (the constructor only reads its logger and build info) switched to the processor's. Every
# other generated file comes from the processor-class run.
set -euo pipefail
mdatagen=$1
dir=processor/gpuenrichprocessor
cd "$(dirname "$0")/.."

(cd "$dir" && "$mdatagen" metadata.yaml)

# A directory inside the module (mdatagen asks `go list` for the package), ignored by
# ./... patterns thanks to its leading underscore.
tmp=$(mktemp -d "$dir/_receiverclassXXXXXX")
trap 'rm -rf "$tmp"' EXIT
sed -e 's/^  class: processor$/  class: receiver/' \
    -e "s|^github_project:|scope_name: github.com/otelcol-gpu/otelcol-gpu/$dir\ngithub_project:|" \
    "$dir/metadata.yaml" > "$tmp/metadata.yaml"
grep -q '^  class: receiver$' "$tmp/metadata.yaml"
echo "package $(basename "$tmp" | tr -c 'a-zA-Z0-9_\n' '_')" > "$tmp/doc.go"
(cd "$tmp" && "$mdatagen" metadata.yaml)
for f in generated_metrics.go generated_metrics_test.go; do
  sed -e 's|"go.opentelemetry.io/collector/receiver"|"go.opentelemetry.io/collector/processor"|' \
      -e 's|"go.opentelemetry.io/collector/receiver/receivertest"|"go.opentelemetry.io/collector/processor/processortest"|' \
      -e 's/receiver\.Settings/processor.Settings/g' \
      -e 's/receivertest\./processortest./g' \
      "$tmp/internal/metadata/$f" > "$dir/internal/metadata/$f"
done
gofmt -l "$dir/internal/metadata" | (! grep .) || { echo "mdatagen-processor: output not gofmt-clean" >&2; exit 1; }
