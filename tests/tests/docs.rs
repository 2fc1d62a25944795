//! The README, the user's guide and its RAIF reference: every internal link resolves (a
//! relative file exists; an anchor names a heading of its file, as GitHub makes heading ids),
//! every sample of output is one that `docs/samples.sh` makes, and the README names every crate
//! of the workspace and every `fsprof` subcommand (from `fsprof --help` of the built program).

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

use pulldown_cmark::{CodeBlockKind, Event, Parser, Tag, TagEnd};

/// The documents checked, relative to the workspace root.
const DOCS: &[&str] = &["README.md", "docs/guide.md", "docs/raif.md"];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The release directory the test binaries were built in (`target/release`).
fn release_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    // target/release/deps/docs-HASH
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// GitHub's id for a heading: lower case, letters, digits, `-` and `_` kept, spaces made `-`,
/// everything else dropped; a repeated id gets `-1`, `-2`...
fn slug(text: &str, seen: &mut HashMap<String, usize>) -> String {
    let base: String = text
        .chars()
        .flat_map(char::to_lowercase)
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect();
    let n = seen.entry(base.clone()).or_insert(0);
    let id = if *n == 0 {
        base.clone()
    } else {
        format!("{base}-{n}")
    };
    *n += 1;
    id
}

/// What one Markdown document holds that the checks need.
#[derive(Default)]
struct Doc {
    anchors: BTreeSet<String>,
    links: Vec<String>,
    /// Each fenced code block's info string, with the sample marker that precedes it, if any.
    blocks: Vec<(String, Option<String>)>,
}

fn parse(text: &str) -> Doc {
    let mut doc = Doc::default();
    let mut seen = HashMap::new();
    let mut heading: Option<String> = None;
    let mut marker: Option<String> = None;
    for event in Parser::new(text) {
        match event {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::End(TagEnd::Heading(_)) => {
                let h = heading.take().unwrap_or_default();
                doc.anchors.insert(slug(&h, &mut seen));
            }
            Event::Text(t) | Event::Code(t) => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(&t);
                }
            }
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                doc.links.push(dest_url.into_string())
            }
            Event::Html(h) | Event::InlineHtml(h) => {
                let h = h.trim();
                if let Some(name) = h
                    .strip_prefix("<!-- sample: ")
                    .and_then(|r| r.strip_suffix(" -->"))
                {
                    marker = Some(name.to_string());
                }
            }
            Event::Start(Tag::CodeBlock(kind)) => {
                let info = match kind {
                    CodeBlockKind::Fenced(info) => info.into_string(),
                    CodeBlockKind::Indented => String::new(),
                };
                doc.blocks.push((info, marker.take()));
            }
            Event::Start(Tag::Paragraph) => {
                marker = None;
            }
            _ => {}
        }
    }
    doc
}

#[test]
fn readme_and_guide_links_resolve() {
    let root = workspace();
    let mut parsed: HashMap<PathBuf, Doc> = HashMap::new();
    let mut problems = Vec::new();
    for name in DOCS {
        let path = root.join(name);
        let doc = parse(&read(&path));
        assert!(!doc.links.is_empty(), "{name}: no links found");
        for link in &doc.links {
            if link.contains("://") || link.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = link.split_once('#').unwrap_or((link, ""));
            let target = if file.is_empty() {
                path.clone()
            } else {
                path.parent().unwrap().join(file)
            };
            if !target.exists() {
                let rel = target.strip_prefix(&root).unwrap_or(&target);
                let rel = normalize(rel);
                problems.push(format!("{name}: link {link}: no file {}", rel.display()));
                continue;
            }
            if anchor.is_empty() {
                continue;
            }
            if target.extension().is_none_or(|e| e != "md") {
                problems.push(format!(
                    "{name}: link {link}: an anchor into a non-Markdown file"
                ));
                continue;
            }
            let key = target.canonicalize().unwrap();
            let anchors = &parsed
                .entry(key.clone())
                .or_insert_with(|| parse(&read(&key)))
                .anchors;
            if !anchors.contains(anchor) {
                problems.push(format!(
                    "{name}: link {link}: no heading with id '{anchor}' in {}",
                    target.display()
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// `a/../b` as `b`, so a link's target compares with a path relative to the root.
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

#[test]
fn every_sample_of_output_is_made_by_samples_sh() {
    let root = workspace();
    let script = read(&root.join("docs/samples.sh"));
    let made: BTreeSet<&str> = script
        .lines()
        .filter_map(|l| l.trim().strip_prefix("marker "))
        .collect();
    assert!(made.len() > 10, "samples.sh makes only {made:?}");
    let mut problems = Vec::new();
    for name in DOCS {
        let doc = parse(&read(&root.join(name)));
        for (i, (info, marker)) in doc.blocks.iter().enumerate() {
            match (info.as_str(), marker) {
                ("text", None) => problems.push(format!(
                    "{name}: code block {} is output (```text) with no `<!-- sample: NAME -->` \
                     line before it",
                    i + 1
                )),
                (_, Some(m)) if !made.contains(m.as_str()) => problems.push(format!(
                    "{name}: sample '{m}' is not made by docs/samples.sh"
                )),
                (info, Some(m)) if info != "text" => problems.push(format!(
                    "{name}: sample '{m}' is followed by a ```{info} block, not ```text"
                )),
                _ => {}
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn readme_names_every_crate_and_every_fsprof_subcommand() {
    let root = workspace();
    let readme = read(&root.join("README.md"));
    let members = members(&root);
    assert!(members.len() >= 10, "{members:?}");
    let mut missing = Vec::new();
    for m in &members {
        if !readme.contains(&format!("`{m}/`")) {
            missing.push(format!("crate `{m}/`"));
        }
    }

    let fsprof = release_dir().join("fsprof");
    assert!(
        fsprof.is_file(),
        "{} is missing: build the workspace first (cargo test --workspace --release does)",
        fsprof.display()
    );
    let out = Command::new(&fsprof).arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    let commands: Vec<&str> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    assert!(commands.len() >= 15, "{commands:?} from:\n{help}");
    for c in commands {
        if !readme.contains(&format!("| `{c}` |")) {
            missing.push(format!("fsprof subcommand `{c}` (a row `| `{c}` |`)"));
        }
    }
    assert!(
        missing.is_empty(),
        "README.md does not name: {}",
        missing.join(", ")
    );
}

#[test]
fn slugs_are_githubs() {
    let mut seen = HashMap::new();
    assert_eq!(slug("The kernel's levels", &mut seen), "the-kernels-levels");
    assert_eq!(slug("FUSE over io_uring", &mut seen), "fuse-over-io_uring");
    assert_eq!(
        slug("A mount of your own: fsprof-fuse", &mut seen),
        "a-mount-of-your-own-fsprof-fuse"
    );
    assert_eq!(slug("fsprof subcommands", &mut seen), "fsprof-subcommands");
    assert_eq!(slug("Options", &mut seen), "options");
    assert_eq!(slug("Options", &mut seen), "options-1");
}

/// What docs/design.md names that the tree lacks, as one line each: a workspace crate with no
/// row in its crate table (`| `NAME` |`), and a file or folder in a code span that does not
/// exist. A name that starts with a crate's folder or another top-level folder of the
/// workspace is read from the root; a shorter one (`handle.rs`, `uring/`) from the folders of
/// the full names before it in its section (`## ...`), anywhere below them, and one with a
/// folder in it (`layers/control.rs`) also from the folders above them. System paths
/// (`/dev/fuse`), names in a mount or a branch (`.fsprof`, `.raif-sums/`) and placeholders
/// (`<id>`, `MNT/...`) are not the tree's and are not checked.
fn design_drift(root: &Path, text: &str, members: &[&str]) -> Vec<String> {
    let mut problems = Vec::new();
    for m in members {
        if !text.contains(&format!("| `{m}`")) {
            problems.push(format!("crate `{m}` has no row in the crate table"));
        }
    }
    let top: BTreeSet<String> = std::fs::read_dir(root)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "target")
        .collect();
    let mut bases: Vec<PathBuf> = Vec::new();
    let mut in_heading = false;
    let mut section = String::new();
    for event in Parser::new(text) {
        match event {
            Event::Start(Tag::Heading { level, .. }) => {
                in_heading = true;
                if level <= pulldown_cmark::HeadingLevel::H2 {
                    bases.clear();
                    section.clear();
                }
            }
            Event::End(TagEnd::Heading(_)) => in_heading = false,
            Event::Text(t) if in_heading && section.is_empty() => section = t.into_string(),
            Event::Code(name) => {
                let name = name.trim();
                let pathlike = !name.is_empty()
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "._-/".contains(c))
                    && (name.contains('/')
                        || [".rs", ".c", ".h", ".md", ".sh", ".toml"]
                            .iter()
                            .any(|e| name.ends_with(e)));
                if !pathlike || name.starts_with('/') || name.starts_with('.') {
                    continue;
                }
                let first = name.split('/').next().unwrap_or_default();
                if first.chars().all(|c| c.is_ascii_uppercase()) && name.contains('/') {
                    continue; // MNT/..., DIR/...
                }
                let rel = name.trim_end_matches('/');
                if name.contains('/') && top.contains(first) {
                    let path = root.join(rel);
                    if path.exists() {
                        let dir = if path.is_dir() {
                            path
                        } else {
                            path.parent().unwrap().to_path_buf()
                        };
                        if !bases.contains(&dir) {
                            bases.push(dir);
                        }
                    } else {
                        problems.push(format!("{section}: `{name}` does not exist"));
                    }
                } else if bases.is_empty() {
                    problems.push(format!(
                        "{section}: `{name}` is named before any folder it could be in"
                    ));
                } else if !bases.iter().any(|b| {
                    found_below(b, Path::new(rel), 4)
                        || (rel.contains('/')
                            && b.ancestors()
                                .take_while(|a| *a != root)
                                .any(|a| a.join(rel).exists()))
                }) {
                    problems.push(format!(
                        "{section}: `{name}` is in none of {}",
                        bases
                            .iter()
                            .map(|b| format!("{}/", b.strip_prefix(root).unwrap_or(b).display()))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                }
            }
            _ => {}
        }
    }
    problems
}

/// Whether `dir/rel` exists, or `sub/rel` for a folder `sub` at most `depth` levels below `dir`.
fn found_below(dir: &Path, rel: &Path, depth: usize) -> bool {
    if dir.join(rel).exists() {
        return true;
    }
    depth > 0
        && std::fs::read_dir(dir).is_ok_and(|entries| {
            entries
                .filter_map(|e| e.ok())
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .any(|e| found_below(&e.path(), rel, depth - 1))
        })
}

fn members(root: &Path) -> Vec<String> {
    let manifest: toml::Table = read(&root.join("Cargo.toml")).parse().unwrap();
    manifest["workspace"]["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn design_names_only_what_the_tree_has_and_every_crate() {
    let root = workspace();
    let members = members(&root);
    let members: Vec<&str> = members.iter().map(String::as_str).collect();
    assert!(members.len() >= 10, "{members:?}");
    let problems = design_drift(&root, &read(&root.join("docs/design.md")), &members);
    assert!(
        problems.is_empty(),
        "docs/design.md has drifted from the tree:\n{}",
        problems.join("\n")
    );
}

/// The drift check fails when a named file is gone, a short name is in no folder of its
/// section, or a crate has no row; and passes what exists.
#[test]
fn the_design_check_finds_a_missing_file_and_a_missing_crate() {
    let root = workspace();
    let good = "## Crates\n\n| `tests` | x |\n\n## House rules\n\n\
                `tests/tests/house_rules.rs` and `docs.rs` beside it; `/dev/fuse`, `MNT/.fsprof`.\n";
    assert_eq!(design_drift(&root, good, &["tests"]), Vec::<String>::new());
    let bad = "## Crates\n\n| `tests` | x |\n\n## House rules\n\n\
               `tests/tests/house_rules.rs`, `tests/tests/gone.rs`; `classic.rs`\n\n## Other\n\n`docs.rs`\n";
    let problems = design_drift(&root, bad, &["tests", "raif"]);
    assert_eq!(problems.len(), 4, "{problems:#?}");
    assert!(problems[0].contains("crate `raif`"), "{problems:#?}");
    assert!(
        problems[1].contains("`tests/tests/gone.rs` does not exist"),
        "{problems:#?}"
    );
    assert!(
        problems[2].contains("`classic.rs` is in none of"),
        "{problems:#?}"
    );
    assert!(problems[3].contains("`docs.rs` is named before any folder"));
}
