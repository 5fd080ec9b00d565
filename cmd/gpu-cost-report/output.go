package main

import (
	"encoding/csv"
	"encoding/json"
	"io"
	"strconv"
	"time"
)

// columns of the CSV, and the keys of a JSON row, in order.
var columns = append([]string{
	"period_start", "period_end", "level", "cluster", "namespace", "workload_kind", "workload",
	"slurm_job_id", "slurm_job_sluid", "gpu_model",
}, append(figureNames[:], "currency")...)

// writeCSV writes one header line and a line per row. An absent figure (nothing measured
// it, or nothing priced it) is an empty cell, never 0.
func writeCSV(w io.Writer, r *report) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(columns); err != nil {
		return err
	}
	for _, row := range r.Rows {
		rec := []string{
			r.Start.Format(time.RFC3339), r.End.Format(time.RFC3339), row.Level, row.Cluster, row.Namespace,
			row.WorkloadKind, row.Workload, row.SlurmJobID, row.SlurmJobSLUID, row.GPUModel,
		}
		for _, f := range row.Figures {
			cell := ""
			if f.OK {
				cell = strconv.FormatFloat(round(f.V), 'f', -1, 64)
			}
			rec = append(rec, cell)
		}
		rec = append(rec, r.Currency)
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// jsonReport is the JSON form: the period, the currency, the warnings and the rows, a
// figure null where the CSV leaves the cell empty.
type jsonReport struct {
	PeriodStart string    `json:"period_start"`
	PeriodEnd   string    `json:"period_end"`
	Currency    string    `json:"currency"`
	Warnings    []string  `json:"warnings"`
	Rows        []jsonRow `json:"rows"`
}

type jsonRow struct {
	Level             string   `json:"level"`
	Cluster           string   `json:"cluster"`
	Namespace         string   `json:"namespace"`
	WorkloadKind      string   `json:"workload_kind"`
	Workload          string   `json:"workload"`
	SlurmJobID        string   `json:"slurm_job_id"`
	SlurmJobSLUID     string   `json:"slurm_job_sluid"`
	GPUModel          string   `json:"gpu_model"`
	GPUHoursAllocated *float64 `json:"gpu_hours_allocated"`
	GPUHoursActive    *float64 `json:"gpu_hours_active"`
	GPUHoursEffective *float64 `json:"gpu_hours_effective"`
	GPUHoursIdle      *float64 `json:"gpu_hours_idle"`
	EnergyKWh         *float64 `json:"energy_kwh"`
	CostAllocated     *float64 `json:"cost_allocated"`
	CostEffective     *float64 `json:"cost_effective"`
	CostIdle          *float64 `json:"cost_idle"`
	CostEnergy        *float64 `json:"cost_energy"`
}

func writeJSON(w io.Writer, r *report) error {
	out := jsonReport{
		PeriodStart: r.Start.Format(time.RFC3339),
		PeriodEnd:   r.End.Format(time.RFC3339),
		Currency:    r.Currency,
		Warnings:    append([]string{}, r.Warnings...),
		Rows:        []jsonRow{},
	}
	for _, row := range r.Rows {
		var v [nFigures]*float64
		for i, f := range row.Figures {
			if f.OK {
				x := round(f.V)
				v[i] = &x
			}
		}
		out.Rows = append(out.Rows, jsonRow{
			Level: row.Level, Cluster: row.Cluster, Namespace: row.Namespace,
			WorkloadKind: row.WorkloadKind, Workload: row.Workload,
			SlurmJobID: row.SlurmJobID, SlurmJobSLUID: row.SlurmJobSLUID, GPUModel: row.GPUModel,
			GPUHoursAllocated: v[hoursAllocated], GPUHoursActive: v[hoursActive],
			GPUHoursEffective: v[hoursEffective], GPUHoursIdle: v[hoursIdle], EnergyKWh: v[energyKWh],
			CostAllocated: v[costAllocated], CostEffective: v[costEffective], CostIdle: v[costIdle],
			CostEnergy: v[costEnergy],
		})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
