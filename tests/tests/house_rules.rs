//! The house rules of the tree, checked over every crate of the workspace (`docs/design.md`,
//! "House rules"):
//!
//! * **No import circles.** No module imports a module that imports it back, directly or
//!   through others. An import edge from module A to module B is any path to B that A's code
//!   names: a `use` item, or an inline path such as `crate::sums::WINDOW`, whether it starts
//!   with `crate::`, `super::`, `self::` or the name of a child module. `mod` declarations and
//!   `pub use` re-exports of a child module are not edges. A module's `#[cfg(test)]` inline
//!   modules are its tests, not its design: their paths are not edges. Modules are counted
//!   per file: an inline module belongs to the file it is written in.
//! * **No import runs back up** in fsprof-fuse and raif. Each crate's `lib.rs` states its
//!   modules' order in the paragraph of its doc comment that begins with the words "The modules
//!   depend on each other in one direction only, from the bottom up:". Levels are separated by
//!   `;`; a level's modules are the intra-doc links (`` [`name`] ``) in it that name a top-level
//!   module of the crate. Every top-level module is in exactly one level, and a file of a module
//!   may import (the edges above) only modules of its own level or below.
//! * **No file over 1,000 lines**, except the kernel ABI (`fsprof-fuse/src/protocol/abi.rs`), files whose
//!   first line says `@generated`, and vendored third-party code (`vendor/`).
//! * **No function over 150 lines.**
//!
//! Each crate root of each package (library, binaries, integration tests, benches, examples)
//! is read from its files with `syn`, as written (before macros expand).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use syn::spanned::Spanned;
use syn::visit::Visit;

/// Files allowed past the length limit, relative to the workspace.
const LONG_FILES_ALLOWED: &[&str] = &["fsprof-fuse/src/protocol/abi.rs"];
const MAX_FILE_LINES: usize = 1000;
const MAX_FN_LINES: usize = 150;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ lies in the workspace")
        .to_path_buf()
}

/// Directories never read: build output, vendored code, hidden directories.
fn skipped(dir: &Path) -> bool {
    let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name == "target" || name == "vendor" || name.starts_with('.') || name == "node_modules"
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            if !skipped(&p) {
                rust_files(&p, out);
            }
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The packages of the workspace: directories with a `Cargo.toml` that has a `[package]`.
fn packages(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(root)
        .expect("read the workspace")
        .flatten()
    {
        let p = e.path();
        if p.is_dir() && !skipped(&p) {
            let manifest = p.join("Cargo.toml");
            if std::fs::read_to_string(&manifest).is_ok_and(|t| t.contains("[package]")) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The crate roots of a package, as Cargo finds them (and `path =` targets, which here are
/// the conventional places).
fn crate_roots(pkg: &Path) -> Vec<PathBuf> {
    let mut roots = Vec::new();
    for f in ["src/lib.rs", "src/main.rs"] {
        if pkg.join(f).is_file() {
            roots.push(pkg.join(f));
        }
    }
    for dir in ["src/bin", "tests", "benches", "examples"] {
        let Ok(entries) = std::fs::read_dir(pkg.join(dir)) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_file() && p.extension().is_some_and(|x| x == "rs") {
                roots.push(p);
            } else if p.join("main.rs").is_file() {
                roots.push(p.join("main.rs"));
            }
        }
    }
    roots.sort();
    roots
}

/// One module of a crate: its path from the crate root, the file it is written in, and its
/// items (as parsed).
struct Module {
    path: Vec<String>,
    file: usize,
    items: Vec<syn::Item>,
    /// Whether it is (inside) a `#[cfg(test)]` module.
    test: bool,
}

/// A crate read from its root: its modules and files.
#[derive(Default)]
struct Crate {
    files: Vec<PathBuf>,
    modules: Vec<Module>,
    by_path: HashMap<Vec<String>, usize>,
    errors: Vec<String>,
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.parse_args::<syn::Meta>()
                .is_ok_and(|m| m.path().is_ident("test"))
    })
}

fn path_attr(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| match &a.meta {
        syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

impl Crate {
    fn read(root: &Path) -> Crate {
        let mut c = Crate::default();
        c.load_file(
            root,
            Vec::new(),
            root.parent().unwrap().to_path_buf(),
            false,
        );
        c
    }

    /// Reads the module in `file` at `path`; `dir` is where its `mod x;` children live.
    fn load_file(&mut self, file: &Path, path: Vec<String>, dir: PathBuf, test: bool) {
        let text = match std::fs::read_to_string(file) {
            Ok(t) => t,
            Err(e) => {
                self.errors.push(format!("{}: {e}", file.display()));
                return;
            }
        };
        let parsed = match syn::parse_file(&text) {
            Ok(p) => p,
            Err(e) => {
                self.errors.push(format!("{}: {e}", file.display()));
                return;
            }
        };
        self.files.push(file.to_path_buf());
        let idx = self.files.len() - 1;
        self.add_module(path, idx, parsed.items, dir, test);
    }

    fn add_module(
        &mut self,
        path: Vec<String>,
        file: usize,
        items: Vec<syn::Item>,
        dir: PathBuf,
        test: bool,
    ) {
        let children: Vec<syn::ItemMod> = items
            .iter()
            .filter_map(|i| match i {
                syn::Item::Mod(m) => Some(m.clone()),
                _ => None,
            })
            .collect();
        self.by_path.insert(path.clone(), self.modules.len());
        self.modules.push(Module {
            path: path.clone(),
            file,
            items,
            test,
        });
        for m in children {
            let name = m.ident.to_string();
            let mut child = path.clone();
            child.push(name.clone());
            let child_test = test || is_cfg_test(&m.attrs);
            match m.content {
                Some((_, items)) => {
                    self.add_module(child, file, items, dir.join(&name), child_test);
                }
                None => {
                    let (f, child_dir) = if let Some(p) = path_attr(&m.attrs) {
                        let f = dir.join(p);
                        let d = f.parent().unwrap().to_path_buf();
                        (f, d)
                    } else if dir.join(format!("{name}.rs")).is_file() {
                        (dir.join(format!("{name}.rs")), dir.join(&name))
                    } else {
                        (dir.join(&name).join("mod.rs"), dir.join(&name))
                    };
                    self.load_file(&f, child, child_dir, child_test);
                }
            }
        }
    }

    /// The module that `segments` (a path named in module `from`) leads into, if it names
    /// one of this crate's modules.
    fn resolve(&self, from: &[String], segments: &[String]) -> Option<Vec<String>> {
        let (mut base, rest): (Vec<String>, &[String]) = match segments.first()?.as_str() {
            "crate" => (Vec::new(), &segments[1..]),
            "self" => (from.to_vec(), &segments[1..]),
            "super" => {
                let mut b = from.to_vec();
                let mut i = 0;
                while segments.get(i).is_some_and(|s| s == "super") {
                    b.pop()?;
                    i += 1;
                }
                (b, &segments[i..])
            }
            first => {
                let mut child = from.to_vec();
                child.push(first.to_string());
                if self.by_path.contains_key(&child) {
                    (from.to_vec(), segments)
                } else {
                    return None;
                }
            }
        };
        for s in rest {
            let mut next = base.clone();
            next.push(s.clone());
            if self.by_path.contains_key(&next) {
                base = next;
            } else {
                break;
            }
        }
        Some(base)
    }
}

/// The paths named by a `use` tree, each as its segments.
fn use_paths(prefix: &mut Vec<String>, tree: &syn::UseTree, out: &mut Vec<Vec<String>>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_paths(prefix, &p.tree, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let mut v = prefix.clone();
            if n.ident != "self" {
                v.push(n.ident.to_string());
            }
            out.push(v);
        }
        syn::UseTree::Rename(r) => {
            let mut v = prefix.clone();
            if r.ident != "self" {
                v.push(r.ident.to_string());
            }
            out.push(v);
        }
        syn::UseTree::Glob(_) => out.push(prefix.clone()),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                use_paths(prefix, t, out);
            }
        }
    }
}

/// Collects the paths named in a module's own items (not in its child modules).
#[derive(Default)]
struct Paths {
    found: Vec<(Vec<String>, usize)>,
}

impl<'a> Visit<'a> for Paths {
    fn visit_item_mod(&mut self, _: &'a syn::ItemMod) {}

    fn visit_item_use(&mut self, _: &'a syn::ItemUse) {}

    fn visit_path(&mut self, p: &'a syn::Path) {
        if p.leading_colon.is_none() && p.segments.len() >= 2 {
            let segs = p.segments.iter().map(|s| s.ident.to_string()).collect();
            self.found.push((segs, p.span().start().line));
        }
        syn::visit::visit_path(self, p);
    }
}

/// An import edge, with where it was named (for the message).
type Edges = BTreeMap<(usize, usize), (String, usize)>;

fn edges(c: &Crate) -> Edges {
    let mut edges = Edges::new();
    for m in &c.modules {
        if m.test {
            continue;
        }
        let mut add = |target: Vec<String>, what: String, line: usize| {
            if let Some(&t) = c.by_path.get(&target) {
                let to = c.modules[t].file;
                if to != m.file {
                    edges.entry((m.file, to)).or_insert((what, line));
                }
            }
        };
        for item in &m.items {
            match item {
                syn::Item::Use(u) => {
                    let mut paths = Vec::new();
                    use_paths(&mut Vec::new(), &u.tree, &mut paths);
                    let reexport = !matches!(u.vis, syn::Visibility::Inherited);
                    for p in paths {
                        let Some(target) = c.resolve(&m.path, &p) else {
                            continue;
                        };
                        // `pub use child::X` (or `self::child::X`) re-exports a child module's
                        // item: part of declaring the child, not an import.
                        let child_of_self =
                            target.len() > m.path.len() && target.starts_with(&m.path);
                        if reexport && child_of_self {
                            continue;
                        }
                        add(target, p.join("::"), u.span().start().line);
                    }
                }
                syn::Item::Mod(_) => {}
                other => {
                    let mut v = Paths::default();
                    v.visit_item(other);
                    for (p, line) in v.found {
                        if let Some(target) = c.resolve(&m.path, &p) {
                            add(target, p.join("::"), line);
                        }
                    }
                }
            }
        }
    }
    edges
}

/// The strongly connected components with more than one file (Tarjan's algorithm).
fn circles(n: usize, edges: &Edges) -> Vec<Vec<usize>> {
    let mut adj = vec![Vec::new(); n];
    for &(a, b) in edges.keys() {
        adj[a].push(b);
    }
    struct T<'a> {
        adj: &'a [Vec<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn strong(t: &mut T, v: usize) {
        t.index[v] = Some(t.next);
        t.low[v] = t.next;
        t.next += 1;
        t.stack.push(v);
        t.on[v] = true;
        for &w in t.adj[v].iter() {
            match t.index[w] {
                None => {
                    strong(t, w);
                    t.low[v] = t.low[v].min(t.low[w]);
                }
                Some(iw) if t.on[w] => t.low[v] = t.low[v].min(iw),
                _ => {}
            }
        }
        if Some(t.low[v]) == t.index[v] {
            let mut comp = Vec::new();
            loop {
                let w = t.stack.pop().unwrap();
                t.on[w] = false;
                comp.push(w);
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        adj: &adj,
        index: vec![None; n],
        low: vec![0; n],
        on: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if t.index[v].is_none() {
            strong(&mut t, v);
        }
    }
    t.out
}

fn rel(root: &Path, p: &Path) -> String {
    p.strip_prefix(root).unwrap_or(p).display().to_string()
}

#[test]
fn no_module_imports_a_module_that_imports_it_back() {
    let root = workspace();
    let mut report = String::new();
    let mut crates = 0;
    for pkg in packages(&root) {
        for croot in crate_roots(&pkg) {
            let c = Crate::read(&croot);
            crates += 1;
            for e in &c.errors {
                writeln!(report, "cannot read {e}").unwrap();
            }
            let edges = edges(&c);
            for comp in circles(c.files.len(), &edges) {
                let set: BTreeSet<usize> = comp.iter().copied().collect();
                writeln!(report, "a circle in {}:", rel(&root, &croot)).unwrap();
                for ((a, b), (what, line)) in &edges {
                    if set.contains(a) && set.contains(b) {
                        writeln!(
                            report,
                            "  {} -> {} ({what}, line {line})",
                            rel(&root, &c.files[*a]),
                            rel(&root, &c.files[*b]),
                        )
                        .unwrap();
                    }
                }
            }
        }
    }
    assert!(
        crates > 10,
        "found only {crates} crate roots under {root:?}"
    );
    assert!(report.is_empty(), "import circles:\n{report}");
}

/// The crates whose `lib.rs` states the order of its modules, checked by [`imports_run_down`].
const ORDERED: &[&str] = &["fsprof-fuse", "raif"];

/// The words that begin the paragraph stating the order.
const ORDER_PARAGRAPH: &str =
    "The modules depend on each other in one direction only, from the bottom up:";

/// The levels of a crate, bottom first, read from the order paragraph of its root's doc
/// comment: in each `;`-separated part, the intra-doc links that name one of `modules`.
fn levels(root_text: &str, modules: &BTreeSet<String>) -> Result<Vec<Vec<String>>, String> {
    let file = syn::parse_file(root_text).map_err(|e| format!("does not parse: {e}"))?;
    let mut doc = String::new();
    for a in &file.attrs {
        if let syn::Meta::NameValue(nv) = &a.meta
            && nv.path.is_ident("doc")
            && let syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) = &nv.value
        {
            doc.push_str(&s.value());
            doc.push('\n');
        }
    }
    let mut paragraph = None;
    for p in doc.split("\n\n") {
        let p = p.split_whitespace().collect::<Vec<_>>().join(" ");
        if let Some(rest) = p.strip_prefix(ORDER_PARAGRAPH) {
            paragraph = Some(rest.to_string());
            break;
        }
    }
    let paragraph = paragraph.ok_or_else(|| {
        format!("its doc comment has no paragraph beginning \"{ORDER_PARAGRAPH}\"")
    })?;
    let mut out = Vec::new();
    for part in paragraph.split(';') {
        let mut level = Vec::new();
        let mut rest = part;
        while let Some(at) = rest.find("[`") {
            rest = &rest[at + 2..];
            let Some(end) = rest.find("`]") else { break };
            let name = &rest[..end];
            rest = &rest[end + 2..];
            if modules.contains(name) && !level.iter().any(|n| n == name) {
                level.push(name.to_string());
            }
        }
        if !level.is_empty() {
            out.push(level);
        }
    }
    Ok(out)
}

/// What breaks the stated order of the crate rooted at `croot` (a `lib.rs`): a top-level module
/// in no level or in two, an import from a module to one of a higher level. Empty when none.
fn order_report(croot: &Path, shown_from: &Path) -> String {
    let mut report = String::new();
    let c = Crate::read(croot);
    for e in &c.errors {
        writeln!(report, "cannot read {e}").unwrap();
    }
    let top: BTreeSet<String> = c
        .modules
        .iter()
        .filter(|m| m.path.len() == 1 && !m.test)
        .map(|m| m.path[0].clone())
        .collect();
    let text = std::fs::read_to_string(croot).unwrap();
    let name = rel(shown_from, croot);
    let levels = match levels(&text, &top) {
        Ok(l) => l,
        Err(e) => {
            writeln!(report, "{name}: {e}").unwrap();
            return report;
        }
    };
    let mut level_of = BTreeMap::new();
    for (i, level) in levels.iter().enumerate() {
        for m in level {
            if level_of.insert(m.clone(), i).is_some() {
                writeln!(report, "{name}: module `{m}` is in more than one level").unwrap();
            }
        }
    }
    for m in &top {
        if !level_of.contains_key(m) {
            writeln!(report, "{name}: module `{m}` is in no level of the order").unwrap();
        }
    }
    // The top-level module each file is written for (the root itself has none).
    let mut top_of_file = vec![None; c.files.len()];
    for m in &c.modules {
        if let Some(t) = m.path.first() {
            top_of_file[m.file] = Some(t.clone());
        }
    }
    for ((a, b), (what, line)) in edges(&c) {
        let (Some(ma), Some(mb)) = (&top_of_file[a], &top_of_file[b]) else {
            continue;
        };
        let (Some(&la), Some(&lb)) = (level_of.get(ma), level_of.get(mb)) else {
            continue;
        };
        if lb > la {
            writeln!(
                report,
                "{} (`{ma}`, level {}) imports `{what}` (line {line}) of `{mb}`, level {}",
                rel(shown_from, &c.files[a]),
                la + 1,
                lb + 1,
            )
            .unwrap();
        }
    }
    report
}

fn imports_run_down(package: &str) {
    assert!(ORDERED.contains(&package));
    let root = workspace();
    let report = order_report(&root.join(package).join("src/lib.rs"), &root);
    assert!(
        report.is_empty(),
        "{package}'s modules against the order its lib.rs states:\n{report}"
    );
}

#[test]
fn no_import_runs_back_up_in_fsprof_fuse() {
    imports_run_down("fsprof-fuse");
}

#[test]
fn no_import_runs_back_up_in_raif() {
    imports_run_down("raif");
}

/// The other libraries state their order too, and keep it (cli-support and tests have no
/// modules to order).
#[test]
fn no_import_runs_back_up_in_the_other_libraries() {
    let root = workspace();
    let mut report = String::new();
    for pkg in packages(&root) {
        let croot = pkg.join("src/lib.rs");
        let name = rel(&root, &pkg);
        if !croot.is_file() || ORDERED.contains(&name.as_str()) {
            continue;
        }
        let c = Crate::read(&croot);
        if !c.modules.iter().any(|m| m.path.len() == 1 && !m.test) {
            continue;
        }
        report.push_str(&order_report(&croot, &root));
    }
    assert!(
        report.is_empty(),
        "modules against the order their lib.rs states:\n{report}"
    );
}

#[test]
fn no_file_is_over_a_thousand_lines_and_no_function_over_150() {
    let root = workspace();
    let mut files = Vec::new();
    for pkg in packages(&root) {
        rust_files(&pkg, &mut files);
    }
    assert!(files.len() > 100, "found only {} files", files.len());
    let mut report = String::new();
    for f in &files {
        let name = rel(&root, f);
        let text = std::fs::read_to_string(f).unwrap();
        let generated = text
            .lines()
            .next()
            .is_some_and(|l| l.contains("@generated"));
        let lines = text.lines().count();
        if lines > MAX_FILE_LINES && !generated && !LONG_FILES_ALLOWED.contains(&name.as_str()) {
            writeln!(report, "{name}: {lines} lines (at most {MAX_FILE_LINES})").unwrap();
        }
        let Ok(parsed) = syn::parse_file(&text) else {
            writeln!(report, "{name}: does not parse").unwrap();
            continue;
        };
        let mut v = Functions::default();
        v.visit_file(&parsed);
        for (fname, start, len) in v.long {
            writeln!(
                report,
                "{name}:{start}: fn {fname} is {len} lines (at most {MAX_FN_LINES})"
            )
            .unwrap();
        }
    }
    assert!(report.is_empty(), "house rules:\n{report}");
}

/// Finds functions longer than the limit.
#[derive(Default)]
struct Functions {
    long: Vec<(String, usize, usize)>,
}

impl Functions {
    fn check(&mut self, name: &syn::Ident, span: proc_macro2::Span) {
        let (start, end) = (span.start().line, span.end().line);
        let len = end + 1 - start;
        if len > MAX_FN_LINES {
            self.long.push((name.to_string(), start, len));
        }
    }
}

impl<'a> Visit<'a> for Functions {
    fn visit_item_fn(&mut self, f: &'a syn::ItemFn) {
        self.check(&f.sig.ident, f.span());
        syn::visit::visit_item_fn(self, f);
    }

    fn visit_impl_item_fn(&mut self, f: &'a syn::ImplItemFn) {
        self.check(&f.sig.ident, f.span());
        syn::visit::visit_impl_item_fn(self, f);
    }

    fn visit_trait_item_fn(&mut self, f: &'a syn::TraitItemFn) {
        if f.default.is_some() {
            self.check(&f.sig.ident, f.span());
        }
        syn::visit::visit_trait_item_fn(self, f);
    }
}

/// The checker itself: a circle through `super::` and one through a child's name are found, a
/// `pub use` of a child is not an edge, and a long function is measured by its lines.
#[test]
fn the_checker_finds_what_it_must() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("b")).unwrap();
    std::fs::write(
        src.join("lib.rs"),
        "mod a;\nmod b;\nmod c;\npub use c::Z;\nuse crate::a::X;\n",
    )
    .unwrap();
    // a -> b::inner (a use), b::inner -> a (an inline path): a circle of two files.
    std::fs::write(src.join("a.rs"), "pub struct X;\nuse crate::b::inner::Y;\n").unwrap();
    std::fs::write(src.join("b/mod.rs"), "pub mod inner;\npub use inner::Y;\n").unwrap();
    std::fs::write(
        src.join("b/inner.rs"),
        "pub struct Y;\nfn f() { let _ = crate::a::X; }\n#[cfg(test)]\nmod tests { use crate::c::Z; }\n",
    )
    .unwrap();
    // c -> lib (super::), and lib's `pub use c::Z` is no edge: no circle through c; its test
    // module's import of b is no edge either.
    std::fs::write(
        src.join("c.rs"),
        "pub struct Z;\nfn g() { let _ = super::Q; }\n",
    )
    .unwrap();
    let c = Crate::read(&src.join("lib.rs"));
    assert!(c.errors.is_empty(), "{:?}", c.errors);
    let e = edges(&c);
    let comps = circles(c.files.len(), &e);
    let names: Vec<Vec<String>> = comps
        .iter()
        .map(|comp| comp.iter().map(|&i| rel(dir.path(), &c.files[i])).collect())
        .collect();
    assert_eq!(
        names,
        vec![vec!["src/a.rs".to_string(), "src/b/inner.rs".into()]]
    );
    // lib -> a is an edge (a `use`), lib -> c is not (`pub use` of a child).
    let file = |n: &str| c.files.iter().position(|f| f.ends_with(n)).unwrap();
    assert!(e.contains_key(&(file("lib.rs"), file("a.rs"))));
    assert!(!e.contains_key(&(file("lib.rs"), file("c.rs"))));
    assert!(e.contains_key(&(file("c.rs"), file("lib.rs"))));

    let long = format!(
        "fn long() {{\n{}}}\nfn short() {{}}\n",
        "    let _ = 1;\n".repeat(149)
    );
    let mut v = Functions::default();
    v.visit_file(&syn::parse_file(&long).unwrap());
    assert_eq!(v.long, vec![("long".to_string(), 1, 151)]);
}

/// The order checker itself: an import of a higher level is found (a `use` and an inline path),
/// same-level and downward imports and a test module's imports are not, a module missing from
/// the order is named, and links that are not top-level modules are ignored.
#[test]
fn the_order_checker_finds_what_it_must() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("up")).unwrap();
    std::fs::write(
        src.join("lib.rs"),
        format!(
            "//! A crate.\n//!\n//! {ORDER_PARAGRAPH} the leaf [`low`] (see\n//!              [`low::X`] and [`std`]); [`up`] and [`side`].\n//!\n//! More.\n\n\
             mod low;\nmod up;\nmod side;\nmod lost;\nuse crate::up::Y;\n"
        ),
    )
    .unwrap();
    std::fs::write(
        src.join("low.rs"),
        "pub struct X;\nuse crate::up::inner::Y;\nfn f() { let _ = crate::side::Z; }\n\
         #[cfg(test)]\nmod tests { use crate::lost::W; }\n",
    )
    .unwrap();
    std::fs::write(src.join("up/mod.rs"), "pub mod inner;\npub use inner::Y;\n").unwrap();
    std::fs::write(
        src.join("up/inner.rs"),
        "pub struct Y;\nuse crate::low::X;\nuse crate::side::Z;\n",
    )
    .unwrap();
    std::fs::write(src.join("side.rs"), "pub struct Z;\nuse crate::up::Y;\n").unwrap();
    std::fs::write(src.join("lost.rs"), "pub struct W;\n").unwrap();
    let report = order_report(&src.join("lib.rs"), dir.path());
    let mut lines: Vec<&str> = report.lines().collect();
    lines.sort();
    assert_eq!(
        lines,
        vec![
            "src/lib.rs: module `lost` is in no level of the order",
            "src/low.rs (`low`, level 1) imports `crate::side::Z` (line 3) of `side`, level 2",
            "src/low.rs (`low`, level 1) imports `crate::up::inner::Y` (line 2) of `up`, level 2",
        ],
        "{report}"
    );
    let none = levels("//! No order here.\n", &BTreeSet::new());
    assert!(none.unwrap_err().contains(ORDER_PARAGRAPH));
}
