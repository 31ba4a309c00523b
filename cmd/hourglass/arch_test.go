package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

const modulePath = "github.com/hourglassdb/hourglass"

// TestArchitectureDiagram holds the dependency block of docs/architecture.md
// against the imports of the module's packages: each line of the block names
// a package and every package of the module its non-test files import.
func TestArchitectureDiagram(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	drawn := diagramImports(t, string(doc))
	actual := moduleImports(t, root)
	for pkg, imps := range actual {
		d, ok := drawn[pkg]
		if !ok {
			t.Errorf("package %s (imports %v) is missing from docs/architecture.md", pkg, imps)
			continue
		}
		if !slices.Equal(d, imps) {
			t.Errorf("docs/architecture.md: %s imports %v, the diagram says %v", pkg, imps, d)
		}
	}
	for pkg := range drawn {
		if _, ok := actual[pkg]; !ok {
			t.Errorf("docs/architecture.md names package %s, which does not exist", pkg)
		}
	}
}

// diagramImports reads the first fenced block of the document whose lines
// have the form "pkg ─► a, b".
func diagramImports(t *testing.T, doc string) map[string][]string {
	out := map[string][]string{}
	in := false
	for line := range strings.Lines(doc) {
		line = strings.TrimSpace(line)
		if line == "```" {
			if in && len(out) > 0 {
				return out
			}
			in = !in
			continue
		}
		pkg, deps, ok := strings.Cut(line, "─►")
		if !in || !ok {
			continue
		}
		var list []string
		for d := range strings.SplitSeq(deps, ",") {
			if d = strings.TrimSpace(d); d != "" {
				list = append(list, d)
			}
		}
		slices.Sort(list)
		out[strings.TrimSpace(pkg)] = list
	}
	if len(out) == 0 {
		t.Fatal("docs/architecture.md has no dependency block (lines \"pkg ─► a, b\" in a fenced block)")
	}
	return out
}

// moduleImports parses the non-test Go files of every package directory
// under root and returns, per package (path relative to the module), the
// module's packages it imports, sorted.
func moduleImports(t *testing.T, root string) map[string][]string {
	out := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (name == "testdata" || name == "node_modules" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		if ignored(f.Comments) {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(rel)
		imps := out[pkg]
		if imps == nil {
			imps = []string{}
		}
		for _, is := range f.Imports {
			p, _ := strconv.Unquote(is.Path.Value)
			if rest, ok := strings.CutPrefix(p, modulePath+"/"); ok && !slices.Contains(imps, rest) {
				imps = append(imps, rest)
			}
		}
		out[pkg] = imps
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, imps := range out {
		slices.Sort(imps)
	}
	return out
}

// ignored reports a file built only on demand (//go:build ignore).
func ignored(groups []*ast.CommentGroup) bool {
	for _, g := range groups {
		for _, c := range g.List {
			if strings.HasPrefix(c.Text, "//go:build") && strings.Contains(c.Text, "ignore") {
				return true
			}
		}
	}
	return false
}

// maxFuncLines bounds a function of the engine, the command layer, the
// front doors and the replica set, signature to closing brace: a function
// past it does several things, each of which deserves a name.
const maxFuncLines = 150

// TestFunctionLength holds the packages that carry the server's logic to
// maxFuncLines a function (tests aside).
func TestFunctionLength(t *testing.T) {
	root := filepath.Join("..", "..")
	for _, dir := range []string{"timeseries", "command", "api", "api/lineproto", "api/render", "mongowire", "replset", "model"} {
		paths, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range paths {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > maxFuncLines {
					t.Errorf("%s: %s is %d lines, over %d: split it", path, fd.Name.Name, n, maxFuncLines)
				}
			}
		}
	}
}

// doorPackages are the front doors: codecs over the command layer.
var doorPackages = []string{"api", "api/lineproto", "api/render", "mongowire"}

// TestDoorsGoThroughCommands fails when a front door reaches into the
// engine or the replica set for what the command layer owns: a call, from
// a door's non-test code, of a method of command.Writer (every write and
// DDL) on a *timeseries.DB or a *replset.Node, which would bypass the
// routing to the replica set; a call of a function of package replset
// (the doors read a member's state, they do not drive it); and an import
// of the engine by the packages that stand on model alone.
func TestDoorsGoThroughCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("type-checks the doors")
	}
	pkgs := []string{modulePath + "/command"}
	for _, d := range doorPackages {
		pkgs = append(pkgs, modulePath+"/"+d)
	}
	loaded, err := packages.Load(&packages.Config{
		Mode: packages.NeedName | packages.NeedTypes | packages.NeedSyntax | packages.NeedTypesInfo | packages.NeedImports,
		Dir:  filepath.Join("..", ".."),
	}, pkgs...)
	if err != nil {
		t.Fatal(err)
	}
	// What the command layer owns: the Writer's methods, and the
	// Service's commands (Find, Count, Aggregate, ...). A door calling one of
	// them on the engine, a collection handle or the member goes around
	// the layer.
	owned := map[string]string{}
	for _, p := range loaded {
		for _, e := range p.Errors {
			t.Fatalf("%s: %v", p.PkgPath, e)
		}
		if p.PkgPath != modulePath+"/command" {
			continue
		}
		writer := p.Types.Scope().Lookup("Writer").Type().Underlying().(*types.Interface)
		for i := range writer.NumMethods() {
			owned[writer.Method(i).Name()] = "command.Service.Writer"
		}
		svc := types.NewPointer(p.Types.Scope().Lookup("Service").Type())
		ms := types.NewMethodSet(svc)
		for i := range ms.Len() {
			// A command takes a context; the accessors (DB, Node) do not.
			sig := ms.At(i).Obj().Type().(*types.Signature)
			if sig.Params().Len() == 0 || sig.Params().At(0).Type().String() != "context.Context" {
				continue
			}
			if _, ok := owned[ms.At(i).Obj().Name()]; !ok {
				owned[ms.At(i).Obj().Name()] = "command.Service"
			}
		}
	}
	if owned["Insert"] == "" || owned["Find"] == "" {
		t.Fatalf("the command layer's Writer or Service was not found: %v", owned)
	}
	engines := map[string]bool{modulePath + "/timeseries.DB": true, modulePath + "/timeseries.Collection": true,
		modulePath + "/replset.Node": true}
	for _, p := range loaded {
		if p.PkgPath == modulePath+"/command" {
			continue
		}
		for _, f := range p.Syntax {
			name := p.Fset.Position(f.Pos()).Filename
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if fn, ok := p.TypesInfo.Uses[sel.Sel].(*types.Func); ok && fn.Pkg() != nil &&
					fn.Pkg().Path() == modulePath+"/replset" && fn.Type().(*types.Signature).Recv() == nil {
					t.Errorf("%s: the door calls replset.%s: what it does belongs in the command layer", p.Fset.Position(sel.Pos()), fn.Name())
				}
				via := owned[sel.Sel.Name]
				if via == "" {
					return true
				}
				s := p.TypesInfo.Selections[sel]
				if s == nil || s.Kind() != types.MethodVal {
					return true
				}
				recv := s.Recv()
				if ptr, ok := recv.(*types.Pointer); ok {
					recv = ptr.Elem()
				}
				if named, ok := recv.(*types.Named); ok && named.Obj().Pkg() != nil &&
					engines[named.Obj().Pkg().Path()+"."+named.Obj().Name()] {
					t.Errorf("%s: the door calls %s.%s, which the command layer owns: go through %s",
						p.Fset.Position(sel.Pos()), named.Obj().Name(), sel.Sel.Name, via)
				}
				return true
			})
		}
	}
	for _, p := range loaded {
		if p.PkgPath != modulePath+"/api/lineproto" && p.PkgPath != modulePath+"/api/render" {
			continue
		}
		for imp := range p.Imports {
			if imp == modulePath+"/timeseries" || imp == modulePath+"/replset" {
				t.Errorf("%s imports %s: it stands on model alone", p.PkgPath, imp)
			}
		}
	}
}
