//! `cumulo new <language> <name>`: writes a small working service in one of
//! the SDK languages (the shape of examples/http_req/<language>/), and says
//! how to build it and the `[[service]]` lines that run it under a core.
//!
//! The templates are the files beside this one, compiled into the binary.
//! Three placeholders, `{{name}}`, `{{prefix}}` and `{{sdk}}` (and, in the
//! README, the build command and the config lines), are filled by plain
//! replacement: the templates have no loops or conditions, so a template
//! engine would add a dependency and an escaping syntax of its own to every
//! language's braces for nothing.

use clap::{Args, ValueEnum};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The `cumulo new` command line.
#[derive(Args, Debug)]
pub struct NewArgs {
    /// The language of the service (its SDK).
    #[arg(value_enum)]
    pub language: Language,
    /// The service's name: it subscribes <NAME>/get. Lowercase letters,
    /// digits and '_', starting with a letter (a valid module or package
    /// name in every language).
    pub name: String,
    /// The folder to write (default ./<NAME>): a new or an empty one.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// The service's prefix in the config (default /<NAME>/).
    #[arg(long, value_name = "PREFIX")]
    pub prefix: Option<String>,
    /// The folder of the SDKs (sdk/ of a cumulo source tree; default: the
    /// one this binary was built from).
    #[arg(long, value_name = "DIR")]
    pub sdk: Option<PathBuf>,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Language {
    C,
    Cpp,
    Python,
    Go,
    Rust,
    Java,
    Javascript,
    Ruby,
    Php,
    Perl,
    Erlang,
    Ocaml,
    Haskell,
    Ats2,
}

/// A file to write: its name in the new folder (placeholders filled) and
/// its template.
type Template = (&'static str, &'static str);

macro_rules! templates {
    ($($lang:literal / $file:literal => $out:literal),+ $(,)?) => {
        &[$(($out, include_str!(concat!($lang, "/", $file)))),+]
    };
}

const README: &str = include_str!("README.md");

impl Language {
    /// The name of the language in prose.
    fn title(self) -> &'static str {
        match self {
            Language::C => "C",
            Language::Cpp => "C++",
            Language::Python => "Python",
            Language::Go => "Go",
            Language::Rust => "Rust",
            Language::Java => "Java",
            Language::Javascript => "JavaScript",
            Language::Ruby => "Ruby",
            Language::Php => "PHP",
            Language::Perl => "Perl",
            Language::Erlang => "Erlang",
            Language::Ocaml => "OCaml",
            Language::Haskell => "Haskell",
            Language::Ats2 => "ATS2",
        }
    }

    /// The argument that names it on the command line (and its folder under sdk/).
    fn arg(self) -> String {
        self.to_possible_value().map(|v| v.get_name().to_string()).unwrap_or_default()
    }

    fn templates(self) -> &'static [Template] {
        match self {
            Language::C => templates!("c" / "CMakeLists.txt" => "CMakeLists.txt", "c" / "service.c" => "{{name}}.c"),
            Language::Cpp => templates!(
                "cpp" / "CMakeLists.txt" => "CMakeLists.txt",
                "cpp" / "service.cpp" => "{{name}}.cpp",
            ),
            Language::Python => templates!("python" / "service.py" => "{{name}}.py"),
            Language::Go => templates!("go" / "go.mod" => "go.mod", "go" / "main.go" => "main.go"),
            Language::Rust => templates!("rust" / "Cargo.toml" => "Cargo.toml", "rust" / "main.rs" => "src/main.rs"),
            Language::Java => templates!("java" / "Service.java" => "Service.java"),
            Language::Javascript => templates!(
                "javascript" / "package.json" => "package.json",
                "javascript" / "service.mjs" => "{{name}}.mjs",
            ),
            Language::Ruby => templates!("ruby" / "service.rb" => "{{name}}.rb"),
            Language::Php => templates!("php" / "service.php" => "{{name}}.php"),
            Language::Perl => templates!("perl" / "service.pl" => "{{name}}.pl"),
            Language::Erlang => templates!("erlang" / "service.erl" => "{{name}}.erl"),
            Language::Ocaml => templates!(
                "ocaml" / "dune-project" => "dune-project",
                "ocaml" / "dune" => "dune",
                "ocaml" / "service.ml" => "{{name}}.ml",
            ),
            Language::Haskell => templates!(
                "haskell" / "cabal.project" => "cabal.project",
                "haskell" / "service.cabal" => "service.cabal",
                "haskell" / "Main.hs" => "Main.hs",
                "haskell" / "build.sh" => "build.sh",
            ),
            Language::Ats2 => templates!("ats2" / "Makefile" => "Makefile", "ats2" / "service.dats" => "{{name}}.dats"),
        }
    }

    /// What the service needs built in the SDK folder before it runs, and
    /// how the source tree builds it.
    fn sdk_build(self) -> Option<(&'static str, &'static str)> {
        match self {
            Language::Java => Some(("java/target", "cd sdk/java && mvn -q -DskipTests install")),
            Language::Erlang => Some(("erlang/_build/default/lib/cumulo/ebin", "cd sdk/erlang && rebar3 compile")),
            Language::Ocaml => Some(("ocaml/_install/lib/cumulo", "bash sdk/ocaml/test.sh")),
            _ => None,
        }
    }
}

/// The lines of one `[[service]]` table, in the order a reader expects them.
#[derive(Serialize)]
struct ServiceLines {
    prefix: String,
    path: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    args: Vec<String>,
    count_process: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    timeout_init: Option<u32>,
}

#[derive(Serialize)]
struct Config {
    service: Vec<ServiceLines>,
}

/// Where the service will be, everything its build and config lines name.
struct Plan {
    lang: Language,
    name: String,
    prefix: String,
    dir: PathBuf,
    sdk: PathBuf,
    /// Where cargo puts what it builds ($CARGO_TARGET_DIR, else the folder's target/).
    cargo_target: PathBuf,
}

impl Plan {
    fn at(&self, path: &str) -> String {
        self.dir.join(path).display().to_string()
    }

    fn dir(&self) -> String {
        self.dir.display().to_string()
    }

    fn sdk_at(&self, path: &str) -> String {
        self.sdk.join(path).display().to_string()
    }

    /// The Python that runs the service: the SDK's virtualenv (with its C
    /// codec) when there is one, else python3 with the SDK's source.
    fn python(&self) -> String {
        let venv = self.sdk.join("python/.venv/bin/python");
        if venv.exists() {
            venv.display().to_string()
        } else {
            "python3".into()
        }
    }

    /// The shell command that builds the service (for an interpreted
    /// language, a syntax check).
    fn build(&self) -> String {
        let q = |s: String| quote(&s);
        let n = &self.name;
        match self.lang {
            Language::C | Language::Cpp => format!(
                "cmake -S {} -B {} -DCMAKE_BUILD_TYPE=Release && cmake --build {}",
                q(self.dir()),
                q(self.at("build")),
                q(self.at("build"))
            ),
            Language::Python => format!("{} -m py_compile {}", q(self.python()), q(self.at(&format!("{n}.py")))),
            Language::Go => format!("cd {} && go build -o {n} .", q(self.dir())),
            Language::Rust => format!("cargo build --release --manifest-path {}", q(self.at("Cargo.toml"))),
            Language::Java => format!(
                "javac -cp {} -d {} {}",
                q(self.sdk_at("java/target/*")),
                q(self.at("target")),
                q(self.at("Service.java"))
            ),
            Language::Javascript => format!("node --check {}", q(self.at(&format!("{n}.mjs")))),
            Language::Ruby => format!("ruby -c {}", q(self.at(&format!("{n}.rb")))),
            Language::Php => format!("php -l {}", q(self.at(&format!("{n}.php")))),
            Language::Perl => format!("perl -c {}", q(self.at(&format!("{n}.pl")))),
            Language::Erlang => format!(
                "mkdir -p {ebin} && erlc -o {ebin} {}",
                q(self.at(&format!("{n}.erl"))),
                ebin = q(self.at("ebin"))
            ),
            Language::Ocaml => format!(
                "cd {} && OCAMLPATH={} dune build --root . ./{n}.exe",
                q(self.dir()),
                q(self.sdk_at("ocaml/_install/lib"))
            ),
            Language::Haskell => format!("bash {}", q(self.at("build.sh"))),
            Language::Ats2 => format!("make -C {}", q(self.dir())),
        }
    }

    /// The `[[service]]` table that runs the service under a core.
    fn service(&self) -> ServiceLines {
        let n = &self.name;
        let (path, args, timeout_init) = match self.lang {
            Language::C | Language::Cpp => (self.at(&format!("build/{n}")), vec![], None),
            Language::Python => (self.python(), vec![self.at(&format!("{n}.py"))], None),
            Language::Go => (self.at(n), vec![], None),
            Language::Rust => (self.cargo_target.join("release").join(n).display().to_string(), vec![], None),
            // A JVM and an Erlang VM take a while to start on a busy machine.
            Language::Java => {
                let classpath = format!("{}:{}", self.sdk_at("java/target/*"), self.at("target"));
                ("java".into(), vec!["-cp".into(), classpath, "Service".into()], Some(30_000))
            }
            Language::Javascript => ("node".into(), vec![self.at(&format!("{n}.mjs"))], None),
            Language::Ruby => ("ruby".into(), vec![self.at(&format!("{n}.rb"))], None),
            Language::Php => ("php".into(), vec![self.at(&format!("{n}.php"))], None),
            Language::Perl => ("perl".into(), vec![self.at(&format!("{n}.pl"))], None),
            Language::Erlang => {
                // Idle schedulers sleep instead of spinning (as examples/http_req/erlang/run.sh).
                let mut args: Vec<String> =
                    ["-noshell", "-noinput", "+sbwt", "none", "+sbwtdcpu", "none", "+sbwtdio", "none"]
                        .map(String::from)
                        .into();
                args.extend(["-pa".into(), self.sdk_at("erlang/_build/default/lib/cumulo/ebin")]);
                args.extend(["-pa".into(), self.at("ebin"), "-s".into(), n.clone(), "main".into()]);
                ("erl".into(), args, Some(30_000))
            }
            Language::Ocaml => (self.at(&format!("_build/default/{n}.exe")), vec![], None),
            Language::Haskell => (self.at(n), vec![], None),
            Language::Ats2 => (self.at(&format!("build/{n}")), vec![], None),
        };
        ServiceLines { prefix: self.prefix.clone(), path, args, count_process: 1, timeout_init }
    }

    fn fill(&self, template: &str, extra: &BTreeMap<&str, String>) -> String {
        let mut out = template
            .replace("{{name}}", &self.name)
            .replace("{{prefix}}", &self.prefix)
            .replace("{{sdk}}", &self.sdk.display().to_string());
        for (key, value) in extra {
            out = out.replace(&format!("{{{{{key}}}}}"), value);
        }
        out
    }
}

/// A word for the shell: as it is when that is safe, else quoted.
fn quote(word: &str) -> String {
    shlex::try_quote(word).map(|w| w.into_owned()).unwrap_or_else(|_| word.to_string())
}

/// The sdk/ folder of the source tree this binary was built from, if it is still there.
fn built_in_sdk() -> Option<PathBuf> {
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk");
    sdk.is_dir().then(|| sdk.canonicalize().unwrap_or(sdk))
}

fn check_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let ok = chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && name.len() <= 64;
    if ok {
        Ok(())
    } else {
        Err(format!(
            "invalid name '{name}': use lowercase letters, digits and '_', starting with a letter \
             (at most 64), e.g. hello_world: it becomes a module, package and program name"
        ))
    }
}

fn check_prefix(prefix: &str) -> Result<(), String> {
    if !prefix.starts_with('/') || !prefix.ends_with('/') {
        return Err(format!("invalid --prefix '{prefix}': must start and end with '/'"));
    }
    cumulo_pattern::validate(prefix).map_err(|why| format!("invalid --prefix '{prefix}': {why}"))
}

/// The SDK folder is written into source and build files as it is: only
/// characters that need no quoting in any of them.
fn check_sdk(sdk: &Path, lang: Language) -> Result<(), String> {
    let text = sdk.display().to_string();
    if let Some(c) = text.chars().find(|c| !(c.is_ascii_alphanumeric() || "/._+-".contains(*c))) {
        return Err(format!(
            "the SDK folder {text} has a '{c}' in its path, which the generated build files cannot \
             hold: use a path of letters, digits and / . _ + - (a symbolic link will do)"
        ));
    }
    let lang_dir = sdk.join(lang.arg());
    if !lang_dir.is_dir() {
        return Err(format!(
            "{} is not a folder: is --sdk the sdk/ folder of a cumulo source tree?",
            lang_dir.display()
        ));
    }
    Ok(())
}

/// An absolute path, relative to the current folder if it is not one.
fn absolute(path: &Path) -> Result<PathBuf, String> {
    std::path::absolute(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// Writes the service and returns what to tell the user.
pub fn new(args: NewArgs) -> Result<String, String> {
    check_name(&args.name)?;
    let prefix = args.prefix.clone().unwrap_or_else(|| format!("/{}/", args.name));
    check_prefix(&prefix)?;
    let sdk = match &args.sdk {
        Some(dir) => {
            let dir = absolute(dir)?;
            dir.canonicalize().map_err(|e| format!("--sdk {}: {e}", dir.display()))?
        }
        None => built_in_sdk().ok_or_else(|| {
            format!(
                "the SDKs are not where this binary was built ({}/../sdk): pass --sdk with the \
                 sdk/ folder of a cumulo source tree",
                env!("CARGO_MANIFEST_DIR")
            )
        })?,
    };
    check_sdk(&sdk, args.language)?;
    let dir = absolute(&args.dir.clone().unwrap_or_else(|| PathBuf::from(&args.name)))?;
    if dir.exists() {
        let empty = std::fs::read_dir(&dir).map(|mut d| d.next().is_none()).unwrap_or(false);
        if !empty {
            return Err(format!("{} exists and is not an empty folder: choose another --dir", dir.display()));
        }
    }
    let cargo_target = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(t) if !t.is_empty() => absolute(Path::new(&t))?,
        _ => dir.join("target"),
    };
    let plan = Plan { lang: args.language, name: args.name.clone(), prefix, dir, sdk, cargo_target };

    let build = plan.build();
    let config = Config { service: vec![plan.service()] };
    let service = toml::to_string(&config).map_err(|e| format!("cannot write the config lines: {e}"))?;
    let service = service.trim_end().to_string();
    let extra = BTreeMap::from([
        ("language", plan.lang.title().to_string()),
        ("language_arg", plan.lang.arg()),
        ("build", build.clone()),
        ("service", service.clone()),
    ]);

    let mut written = Vec::new();
    let files = plan.lang.templates().iter().copied().chain([("README.md", README)]);
    for (name, template) in files {
        let name = plan.fill(name, &extra);
        let path = plan.dir.join(&name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        std::fs::write(&path, plan.fill(template, &extra))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        written.push(name);
    }

    let mut out = format!(
        "Created {} ({} service {}): {}\n",
        plan.dir.display(),
        plan.lang.title(),
        plan.name,
        written.join(", ")
    );
    if let Some((needed, how)) = plan.lang.sdk_build() {
        if !plan.sdk.join(needed).exists() {
            out += &format!(
                "\nThe {} SDK is not built yet ({} is missing): in its source tree, run\n  {how}\n(or bash scripts/setup.sh, which builds every SDK).\n",
                plan.lang.title(),
                plan.sdk_at(needed)
            );
        }
    }
    out += &format!("\nBuild it:\n  {build}\n");
    out += &format!(
        "\nIt answers {p}{n}/get (through the HTTP gateway: GET {p}{n}?value=42).\n\
         Run it under a core: add these lines to its config file, then `cumulo run --config FILE`\n\
         (or, to a running core, `cumulo services add FILE` with a file of these lines):\n\n{service}\n",
        p = plan.prefix,
        n = plan.name
    );
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_every_language_takes() {
        assert!(check_name("hello").is_ok());
        assert!(check_name("t_ocaml2").is_ok());
        for bad in ["", "Hello", "2x", "a-b", "a.b", "_a", "x y", &"a".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn prefixes_are_checked_as_the_config_does() {
        assert!(check_prefix("/hello/").is_ok());
        assert!(check_prefix("hello/").is_err());
        assert!(check_prefix("/hello").is_err());
        assert!(check_prefix("/a/**/").is_err());
    }

    #[test]
    fn every_language_subscribes_name_get() {
        for lang in Language::value_variants() {
            let subscribes =
                lang.templates().iter().any(|(_, t)| t.contains("\"{{name}}/get\"") || t.contains("'{{name}}/get'"));
            assert!(subscribes, "{lang:?}: no template subscribes {{{{name}}}}/get");
        }
    }
}
