package main

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The release image's base: the only one whose files distrolessBase lays.
const distrolessBase = "gcr.io/distroless/static-debian12:nonroot"

// fromDockerfile fills a spec from a Dockerfile's final stage: its base must be distroless
// static's nonroot image, its one COPY --from the binary, and USER, ENTRYPOINT and CMD are taken
// as written (exec form). Anything else in the stage (RUN, ENV, ...) is refused, since it would
// make the two images differ.
func fromDockerfile(dockerfile, binary string, s spec) (spec, error) {
	if binary == "" {
		return s, fmt.Errorf("-dockerfile needs -binary")
	}
	var stage []string
	for _, line := range joinContinuations(dockerfile) {
		if strings.HasPrefix(strings.ToUpper(line), "FROM ") {
			stage = nil
		}
		stage = append(stage, line)
	}
	if len(stage) == 0 {
		return s, fmt.Errorf("no FROM in the Dockerfile")
	}
	base := strings.Fields(stage[0])[1]
	if ref, _, _ := strings.Cut(base, "@"); ref != distrolessBase {
		return s, fmt.Errorf("final stage is FROM %s; this tool lays only %s", base, distrolessBase)
	}
	s.distroless = true
	copies := 0
	for _, line := range stage[1:] {
		instr, args, _ := strings.Cut(line, " ")
		args = strings.TrimSpace(args)
		var err error
		switch strings.ToUpper(instr) {
		case "COPY":
			f := strings.Fields(args)
			if len(f) != 3 || !strings.HasPrefix(f[0], "--from=") {
				return s, fmt.Errorf("COPY %s: want COPY --from=STAGE SRC DST", args)
			}
			s.files = append(s.files, binary+"="+f[2])
			copies++
		case "USER":
			s.user = args
		case "ENTRYPOINT":
			s.entrypoint, err = execForm(args)
		case "CMD":
			s.cmd, err = execForm(args)
		default:
			return s, fmt.Errorf("final stage has %s, which this tool does not reproduce", instr)
		}
		if err != nil {
			return s, fmt.Errorf("%s %s: %w", instr, args, err)
		}
	}
	if copies != 1 {
		return s, fmt.Errorf("final stage copies %d files; want the binary alone", copies)
	}
	return s, nil
}

// joinContinuations returns the Dockerfile's instructions, one a line, without comments, blank
// lines and the parser directives.
func joinContinuations(dockerfile string) []string {
	var out []string
	var cur strings.Builder
	for _, raw := range strings.Split(dockerfile, "\n") {
		line := strings.TrimSpace(raw)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if rest, ok := strings.CutSuffix(line, "\\"); ok {
			cur.WriteString(rest)
			cur.WriteString(" ")
			continue
		}
		cur.WriteString(line)
		out = append(out, cur.String())
		cur.Reset()
	}
	return out
}

func execForm(args string) ([]string, error) {
	var v []string
	if err := json.Unmarshal([]byte(args), &v); err != nil {
		return nil, fmt.Errorf("want the exec form, a JSON array: %w", err)
	}
	return v, nil
}
