package openapi_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/codeport/codeport/apiserver/openapi"
)

// TestForEnvironmentDropsOnlyWhatOthersServe: an environment's document is the kept one without
// the parts marked for other environments, the references to them and the marks, every other
// byte as kept.
func TestForEnvironmentDropsOnlyWhatOthersServe(t *testing.T) {
	kept := []byte(`{
  "openapi": "3.1.0",
  "paths": {
    "/ping": {
      "get": {
        "parameters": [
          {
            "$ref": "#/components/parameters/Scenario"
          },
          {
            "name": "n",
            "in": "query",
            "schema": {
              "type": "integer",
              "maximum": 1e3
            }
          }
        ],
        "responses": {
          "200": {
            "description": "ok \u00e9 <b>"
          },
          "504": {
            "x-codeport-environments": [
              "sandbox"
            ],
            "description": "the sandbox's timeout"
          }
        }
      }
    },
    "/sandbox/scenarios": {
      "x-codeport-environments": [
        "sandbox"
      ],
      "get": {}
    }
  },
  "components": {
    "parameters": {
      "Scenario": {
        "x-codeport-environments": [
          "sandbox"
        ],
        "name": "X-Sandbox-Scenario",
        "in": "header"
      }
    },
    "schemas": {}
  }
}
`)
	production, err := openapi.ForEnvironment(kept, "production")
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "openapi": "3.1.0",
  "paths": {
    "/ping": {
      "get": {
        "parameters": [
          {
            "name": "n",
            "in": "query",
            "schema": {
              "type": "integer",
              "maximum": 1e3
            }
          }
        ],
        "responses": {
          "200": {
            "description": "ok é <b>"
          }
        }
      }
    }
  },
  "components": {
    "parameters": {},
    "schemas": {}
  }
}
`
	if string(production) != want {
		t.Errorf("production:\n%s\nwant:\n%s", production, want)
	}
	sandbox, err := openapi.ForEnvironment(kept, "sandbox")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sandbox, []byte(openapi.EnvironmentsKey)) ||
		!bytes.Contains(sandbox, []byte(`"/sandbox/scenarios"`)) ||
		!bytes.Contains(sandbox, []byte(`"$ref": "#/components/parameters/Scenario"`)) {
		t.Errorf("sandbox:\n%s", sandbox)
	}
}

// TestKeptDocumentsAreTheSandboxes: the sandbox serves every part of the kept documents, which
// are written as the variants are, so its documents differ from them by the marks alone.
func TestKeptDocumentsAreTheSandboxes(t *testing.T) {
	for name, kept := range map[string][]byte{"v2": openapi.V2(), "v1": openapi.V1()} {
		sandbox, err := openapi.ForEnvironment(kept, "sandbox")
		if err != nil {
			t.Fatal(err)
		}
		var a, b any
		if err := json.Unmarshal(sandbox, &a); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(kept, &b); err != nil {
			t.Fatal(err)
		}
		stripMarks(b)
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		if !bytes.Equal(ja, jb) {
			t.Errorf("%s: the sandbox's document is not the kept one without its marks", name)
		}
		if unmarked, err := openapi.ForEnvironment(sandbox, "production"); err != nil || !bytes.Equal(unmarked, sandbox) {
			t.Errorf("%s: a document without marks does not come back byte for byte (%v)", name, err)
		}
	}
}

func stripMarks(v any) {
	switch v := v.(type) {
	case map[string]any:
		delete(v, openapi.EnvironmentsKey)
		for _, child := range v {
			stripMarks(child)
		}
	case []any:
		for _, child := range v {
			stripMarks(child)
		}
	}
}
