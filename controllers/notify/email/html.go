package email

import (
	"html/template"
	"io"

	"tugboat.dev/tugboat/controllers/notify"
)

// page is the HTML part: the same content as the plain-text part, escaped
// by html/template.
var page = template.Must(template.New("notice").Parse(`<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{{.Title}}</title></head>
<body style="font-family: -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif; font-size: 14px; color: #1f2328;">
<h2 style="margin: 0 0 12px 0;{{if .Failure}} color: #cf222e;{{end}}">{{.Title}}</h2>
{{- if .Facts}}
<table style="border-collapse: collapse; margin-bottom: 16px;">
{{- range .Facts}}
<tr><th style="text-align: left; padding: 2px 12px 2px 0; vertical-align: top;">{{.Label}}</th><td style="padding: 2px 0;">{{if .URL}}<a href="{{.URL}}">{{.Value}}</a>{{else}}{{.Value}}{{end}}</td></tr>
{{- end}}
</table>
{{- end}}
{{- if .Targets}}
<h3 style="margin: 16px 0 6px 0;">Targets</h3>
<ul style="margin: 0; padding-left: 20px;">
{{- range .Targets}}
<li>{{.}}</li>
{{- end}}
</ul>
{{- end}}
{{- if .Timeline}}
<h3 style="margin: 16px 0 6px 0;">Timeline</h3>
<table style="border-collapse: collapse;">
{{- range .Timeline}}
<tr><td style="padding: 2px 12px 2px 0; white-space: nowrap; color: #59636e;">{{.Time}}</td><td style="padding: 2px 12px 2px 0; white-space: nowrap;">{{.Source}}</td><td style="padding: 2px 0;">{{.Text}}</td></tr>
{{- end}}
</table>
{{- end}}
<p style="color: #59636e; font-size: 12px; margin-top: 24px;">Sent by tugboat ({{.Event}}).</p>
</body></html>
`))

type htmlFact struct {
	Label, Value string
	URL          string // set for links
}

type htmlStep struct {
	Time, Source, Text string
}

func renderHTML(w io.Writer, n notify.Notice) error {
	data := struct {
		Title    string
		Event    string
		Failure  bool
		Facts    []htmlFact
		Targets  []string
		Timeline []htmlStep
	}{Title: notify.Title(n), Event: string(n.Event), Failure: notify.IsFailure(n)}
	for _, f := range notify.Facts(n) {
		h := htmlFact{Label: f.Label, Value: f.Value}
		if f.Label == "Link" || f.Label == "Dashboard" {
			// html/template drops URLs with unsafe schemes.
			h.URL = f.Value
		}
		data.Facts = append(data.Facts, h)
	}
	for _, t := range n.Targets {
		data.Targets = append(data.Targets, notify.TargetLine(t))
	}
	for _, s := range n.Timeline {
		step := htmlStep{Source: notify.OneLine(s.Source), Text: notify.OneLine(s.Text)}
		if !s.Time.IsZero() {
			step.Time = s.Time.UTC().Format(notify.TimeLayout)
		}
		data.Timeline = append(data.Timeline, step)
	}
	return page.Execute(w, data)
}
