package access

import "testing"

func TestParseAndOrder(t *testing.T) {
	for _, l := range Levels {
		got, err := Parse(" " + l.String() + " ")
		if err != nil || got != l {
			t.Fatalf("Parse(%q) = %v, %v", l.String(), got, err)
		}
	}
	if _, err := Parse("admin"); err == nil || err.Error() != `expected read, organize or full, got "admin"` {
		t.Fatalf("Parse(admin) error = %v", err)
	}
	if !(Read < Organize && Organize < Full) {
		t.Fatal("levels out of order")
	}
}

func TestEffective(t *testing.T) {
	cases := []struct {
		scope    Scope
		operator Level
		want     Level
	}{
		{Scope{}, Organize, Organize},
		{Scope{Level: Read}, Full, Read},
		{Scope{Level: Full}, Organize, Organize}, // a token never widens
		{Scope{Level: Organize}, Organize, Organize},
	}
	for _, c := range cases {
		if got := c.scope.Effective(c.operator); got != c.want {
			t.Errorf("%v under %v = %v, want %v", c.scope, c.operator, got, c.want)
		}
	}
	if (Scope{}).Narrowed() || !(Scope{NoSend: true}).Narrowed() {
		t.Error("Narrowed is wrong")
	}
	if s := (Scope{Level: Organize, NoSend: true}).String(); s != "organize, no sending" {
		t.Errorf("String = %q", s)
	}
}
