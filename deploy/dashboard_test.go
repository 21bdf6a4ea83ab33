package deploy

import (
	"encoding/json"
	"os"
	"regexp"
	"testing"
)

// TestDashboardShape checks what Grafana needs of deploy/grafana/otelgateway.json: unique panel
// ids and uid, a Prometheus query and a refId on every target, every $variable defined, and no
// two panels overlapping on the grid. That every query returns data from a real collector is
// e2e/deploy_test.go's job.
func TestDashboardShape(t *testing.T) {
	b, err := os.ReadFile("grafana/otelgateway.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID        string `json:"uid"`
		Title      string `json:"title"`
		Templating struct {
			List []struct {
				Name string `json:"name"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			ID      int                      `json:"id"`
			Type    string                   `json:"type"`
			Title   string                   `json:"title"`
			GridPos struct{ H, W, X, Y int } `json:"gridPos"`
			Targets []struct {
				Expr  string `json:"expr"`
				RefID string `json:"refId"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("dashboard is not valid JSON for Grafana: %v", err)
	}
	if d.UID == "" || d.Title == "" {
		t.Error("uid and title are required")
	}
	vars := map[string]bool{"__rate_interval": true, "__interval": true, "__range": true}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
	}
	varRef := regexp.MustCompile(`\$\{?(\w+)`)
	ids := map[int]string{}
	cells := map[[2]int]string{}
	queries := 0
	for _, p := range d.Panels {
		if other, dup := ids[p.ID]; dup {
			t.Errorf("panel id %d used by %q and %q", p.ID, other, p.Title)
		}
		ids[p.ID] = p.Title
		if p.GridPos.W < 1 || p.GridPos.H < 1 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: gridPos %+v outside the 24-column grid", p.Title, p.GridPos)
		}
		for x := p.GridPos.X; x < p.GridPos.X+p.GridPos.W; x++ {
			for y := p.GridPos.Y; y < p.GridPos.Y+p.GridPos.H; y++ {
				if other, taken := cells[[2]int{x, y}]; taken {
					t.Fatalf("panels %q and %q overlap at (%d, %d)", other, p.Title, x, y)
				}
				cells[[2]int{x, y}] = p.Title
			}
		}
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			queries++
			if tg.Expr == "" || tg.RefID == "" || refs[tg.RefID] {
				t.Errorf("panel %q: target %+v needs an expr and a unique refId", p.Title, tg)
			}
			refs[tg.RefID] = true
			for _, m := range varRef.FindAllStringSubmatch(tg.Expr, -1) {
				if !vars[m[1]] {
					t.Errorf("panel %q uses $%s, which is not a template variable", p.Title, m[1])
				}
			}
		}
	}
	t.Logf("%d panels, %d queries", len(ids), queries)
}
