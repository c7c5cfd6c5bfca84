//! `Library`: registering operators, kernels and fallbacks the way `torch::Library` does, at run
//! time or (with [`library!`](crate::library!)) at start-up from any crate.

use std::borrow::Cow;
use std::panic::Location;

use smallvec::SmallVec;

use switchboard_keys::DispatchKey;
use switchboard_schema::{parse_schema_or_name, FunctionSchema, OperatorName, SchemaOrName, Tag};

use crate::debug::RegistrationDebug;
use crate::dispatcher::{Dispatcher, RegistrationHandle};
use crate::error::{DispatchError, DispatchErrorKind, Result};
use crate::kernel::KernelFunction;
use crate::operator::AliasAnalysisKind;

/// The kind of a library (`torch::Library::Kind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LibraryKind {
    /// Defines the operators of a namespace; one per namespace (`TORCH_LIBRARY`).
    Def,
    /// Registers kernels, for one dispatch key or any (`TORCH_LIBRARY_IMPL`).
    Impl,
    /// Defines more operators of a namespace, any number of times (`TORCH_LIBRARY_FRAGMENT`).
    Fragment,
}

impl LibraryKind {
    fn macro_name(self) -> &'static str {
        match self {
            LibraryKind::Def => "TORCH_LIBRARY",
            LibraryKind::Impl => "TORCH_LIBRARY_IMPL",
            LibraryKind::Fragment => "TORCH_LIBRARY_FRAGMENT",
        }
    }

    /// Parses `DEF`, `IMPL` or `FRAGMENT`.
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "DEF" => Ok(LibraryKind::Def),
            "IMPL" => Ok(LibraryKind::Impl),
            "FRAGMENT" => Ok(LibraryKind::Fragment),
            _ => Err(DispatchError::from(DispatchErrorKind::Registration(
                format!("could not parse {s}"),
            ))),
        }
    }
}

/// A set of registrations sharing a namespace (and, for IMPL libraries, a dispatch key), undone
/// together when the library is dropped (`torch::Library`).
///
/// ```
/// use switchboard_dispatcher::{Dispatcher, KernelFunction, Library, LibraryKind, Result};
/// use switchboard_keys::DispatchKey;
/// use switchboard_tensor::Tensor;
///
/// fn my_relu(x: &Tensor) -> Result<Tensor> { Ok(x.clone()) }
///
/// let d = Dispatcher::new();
/// let mut lib = Library::new(&d, LibraryKind::Def, "myops", None).unwrap();
/// lib.def("my_relu(Tensor x) -> Tensor").unwrap();
/// lib.impl_("my_relu", Some(DispatchKey::CPU), KernelFunction::from_fn(my_relu)).unwrap();
/// assert!(d.find_schema("myops::my_relu").is_some());
/// drop(lib);
/// assert!(d.find_schema("myops::my_relu").is_none());
/// ```
pub struct Library {
    dispatcher: Dispatcher,
    kind: LibraryKind,
    ns: Option<String>,
    key: Option<DispatchKey>,
    file: Cow<'static, str>,
    line: u32,
    /// `registered at file:line`, shared by the library's registrations (Note [Debug strings
    /// formatted when printed]).
    debug: RegistrationDebug,
    /// Inline for two registrations (a `def` and its `impl`): no list to allocate.
    handles: SmallVec<[RegistrationHandle; 2]>,
}

impl Library {
    /// A library created here (its registrations are debugged as `registered at file:line` of
    /// the caller). `ns` `"_"` is the wildcard namespace (IMPL libraries only).
    #[track_caller]
    pub fn new(
        dispatcher: &Dispatcher,
        kind: LibraryKind,
        ns: &str,
        key: Option<DispatchKey>,
    ) -> Result<Self> {
        let loc = Location::caller();
        Self::create(
            dispatcher,
            kind,
            ns,
            key,
            Cow::Borrowed(loc.file()),
            loc.line(),
        )
    }

    /// A library with an explicit source location for its debug strings.
    pub fn with_location(
        dispatcher: &Dispatcher,
        kind: LibraryKind,
        ns: &str,
        key: Option<DispatchKey>,
        file: &str,
        line: u32,
    ) -> Result<Self> {
        Self::create(dispatcher, kind, ns, key, Cow::Owned(file.to_owned()), line)
    }

    fn create(
        dispatcher: &Dispatcher,
        kind: LibraryKind,
        ns: &str,
        key: Option<DispatchKey>,
        file: Cow<'static, str>,
        line: u32,
    ) -> Result<Self> {
        let key = key.filter(|k| *k != DispatchKey::Undefined);
        let debug = match &file {
            Cow::Borrowed(file) => RegistrationDebug::location(file, line),
            Cow::Owned(file) => RegistrationDebug::text(format!("registered at {file}:{line}")),
        };
        let mut lib = Library {
            dispatcher: dispatcher.clone(),
            kind,
            ns: (ns != "_").then(|| ns.to_owned()),
            key,
            file,
            line,
            debug,
            handles: SmallVec::new(),
        };
        match kind {
            LibraryKind::Impl => {}
            LibraryKind::Def | LibraryKind::Fragment => {
                let Some(ns) = lib.ns.clone() else {
                    let m = kind.macro_name();
                    return Err(lib.error(format!(
                        "{m}: cannot define {m} with the wildcard namespace _ (every {m} defines \
                         operators for a distinct namespace!) Did you mean to use \
                         TORCH_LIBRARY_IMPL instead? "
                    )));
                };
                if kind == LibraryKind::Def {
                    let h = dispatcher.register_library(&ns, lib.debug())?;
                    lib.handles.push(h);
                }
                if lib.key.is_some() {
                    // PyTorch's internal assert, as its conformance data records it: a DEF or
                    // FRAGMENT library takes no dispatch key.
                    return Err(lib.error(
                        "!dispatch_key_.has_value() INTERNAL ASSERT FAILED at \
                         \"<pytorch>/aten/src/ATen/core/library.cpp\":<line>, please report a bug \
                         to PyTorch."
                            .into(),
                    ));
                }
            }
        }
        Ok(lib)
    }

    /// The dispatcher this library registers into.
    pub fn dispatcher(&self) -> &Dispatcher {
        &self.dispatcher
    }

    /// `registered at file:line`, made once per library and shared by its registrations.
    fn debug(&self) -> RegistrationDebug {
        self.debug.clone()
    }

    fn context(&self) -> String {
        format!(
            "(Error occurred while processing {} block at {}:{})",
            self.kind.macro_name(),
            self.file,
            self.line
        )
    }

    fn error(&self, msg: String) -> DispatchError {
        DispatchError::from(DispatchErrorKind::Registration(format!(
            "{msg} {}",
            self.context()
        )))
    }

    /// Defines an operator from its schema (alias analysis FROM_SCHEMA). The namespace defaults
    /// to the library's.
    pub fn def(&mut self, schema: &str) -> Result<OperatorName> {
        self.def_with_alias(schema, Some(AliasAnalysisKind::FromSchema))
    }

    /// Defines an operator leaving its alias analysis unset (`def_legacy`).
    pub fn def_legacy(&mut self, schema: &str) -> Result<OperatorName> {
        self.def_with_alias(schema, None)
    }

    /// Defines an operator with the given alias analysis (`None`: unset).
    pub fn def_with_alias(
        &mut self,
        schema: &str,
        alias: Option<AliasAnalysisKind>,
    ) -> Result<OperatorName> {
        let parsed = FunctionSchema::parse(schema).map_err(schema_error)?;
        self.def_schema(parsed, alias)
    }

    /// Defines an operator with `tags` (`m.def(schema, {at::Tag::pointwise})`, alias analysis
    /// FROM_SCHEMA). The tags are fixed at def time and read with
    /// [`OperatorHandle::has_tag`](crate::OperatorHandle::has_tag) and
    /// [`OperatorHandle::tags`](crate::OperatorHandle::tags) (Note [Operator tags] in
    /// switchboard-schema).
    ///
    /// ```
    /// use switchboard_dispatcher::{Dispatcher, Library, LibraryKind, Tag};
    ///
    /// let d = Dispatcher::new();
    /// let mut lib = Library::new(&d, LibraryKind::Def, "myops", None)?;
    /// lib.def_with_tags("sample(Tensor x) -> Tensor", &[Tag::NondeterministicSeeded])?;
    /// let op = d.find_schema_or_throw("myops::sample")?;
    /// assert!(op.has_tag(Tag::NondeterministicSeeded));
    /// assert!(!op.has_tag(Tag::Pointwise));
    /// assert_eq!(op.tags(), [Tag::NondeterministicSeeded]);
    /// # Ok::<(), switchboard_dispatcher::DispatchError>(())
    /// ```
    pub fn def_with_tags(&mut self, schema: &str, tags: &[Tag]) -> Result<OperatorName> {
        let parsed = FunctionSchema::parse(schema).map_err(schema_error)?;
        self.def_schema_with_tags(parsed, Some(AliasAnalysisKind::FromSchema), tags.to_vec())
    }

    /// Like [`def_with_tags`](Self::def_with_tags) with the tags' tags.yaml names
    /// (`"pointwise"`); a name tags.yaml does not declare is an error naming the tag and the
    /// operator, and defines nothing.
    ///
    /// ```
    /// use switchboard_dispatcher::{Dispatcher, Library, LibraryKind, Tag};
    ///
    /// let d = Dispatcher::new();
    /// let mut lib = Library::new(&d, LibraryKind::Def, "myops", None)?;
    /// lib.def_with_tag_names("double(Tensor x) -> Tensor", &["pointwise", "core"])?;
    /// assert_eq!(d.find_schema_or_throw("myops::double")?.tags(), [Tag::Pointwise, Tag::Core]);
    ///
    /// let err = lib.def_with_tag_names("half(Tensor x) -> Tensor", &["elementwise"]).unwrap_err();
    /// assert!(err.to_string().contains("unknown tag `elementwise` for operator myops::half"));
    /// assert!(d.find_schema("myops::half").is_none());
    /// # Ok::<(), switchboard_dispatcher::DispatchError>(())
    /// ```
    pub fn def_with_tag_names(&mut self, schema: &str, tags: &[&str]) -> Result<OperatorName> {
        let parsed = FunctionSchema::parse(schema).map_err(schema_error)?;
        let parsed = self.qualify(parsed)?;
        let op = parsed.operator_name().to_string();
        let tags = tags
            .iter()
            .map(|t| Tag::parse_for(&op, t))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| self.error(e.to_string()))?;
        self.def_schema_with_tags(parsed, Some(AliasAnalysisKind::FromSchema), tags)
    }

    /// Defines an operator from a parsed schema.
    pub fn def_schema(
        &mut self,
        schema: FunctionSchema,
        alias: Option<AliasAnalysisKind>,
    ) -> Result<OperatorName> {
        self.def_schema_with_tags(schema, alias, Vec::new())
    }

    /// Defines an operator from a parsed schema, with tags.
    pub fn def_schema_with_tags(
        &mut self,
        schema: FunctionSchema,
        alias: Option<AliasAnalysisKind>,
        tags: Vec<Tag>,
    ) -> Result<OperatorName> {
        if self.kind == LibraryKind::Impl {
            return Err(self.error(format!(
                "def(\"{}\"): Cannot define an operator inside of a TORCH_LIBRARY_IMPL block.  All \
                 def()s should be placed in the (unique) TORCH_LIBRARY block for their namespace. ",
                schema.operator_name()
            )));
        }
        let schema = self.qualify(schema)?;
        let name = schema.operator_name().clone();
        let h = self
            .dispatcher
            .register_def_with_tags(schema, self.debug(), alias, tags)?;
        self.handles.push(h);
        Ok(name)
    }

    fn qualify(&self, schema: FunctionSchema) -> Result<FunctionSchema> {
        let lib_ns = self.ns.as_deref().unwrap_or("_");
        match schema.namespace() {
            Some(ns) if ns != lib_ns => Err(self.error(format!(
                "Explicitly provided namespace ({ns}) in schema string does not match namespace \
                 of enclosing {} block ({lib_ns}).  Move this definition to the (unique) \
                 TORCH_LIBRARY block corresponding to this namespace (and consider deleting the \
                 namespace from your schema string.) ",
                self.kind.macro_name()
            ))),
            Some(_) => Ok(schema),
            None => {
                let name =
                    OperatorName::new(qualified(lib_ns, schema.name()), schema.overload_name());
                Ok(schema.with_name(name))
            }
        }
    }

    /// Defines an operator and registers a kernel for it in one step: `name_or_schema` is a full
    /// schema, or just a name, in which case the schema is the kernel's inferred one (alias
    /// analysis CONSERVATIVE). `key` `None` registers a catch-all.
    pub fn def_with_kernel(
        &mut self,
        name_or_schema: &str,
        key: Option<DispatchKey>,
        kernel: KernelFunction,
        debug: Option<&str>,
    ) -> Result<OperatorName> {
        let parsed = parse_schema_or_name(name_or_schema).map_err(schema_error)?;
        let (schema, alias) = match parsed {
            SchemaOrName::Schema(s) => (s, Some(AliasAnalysisKind::FromSchema)),
            SchemaOrName::Name(n) => {
                let (args, rets) = kernel.inferred_signature().ok_or_else(|| {
                    DispatchError::from(DispatchErrorKind::Registration(format!(
                        "def(\"{n}\"): a boxed kernel has no signature to infer a schema from"
                    )))
                })?;
                let text = format!("{n}{}", crate::schema_check::format_inferred(args, rets));
                let s = FunctionSchema::parse(&text).map_err(schema_error)?;
                (s, Some(AliasAnalysisKind::Conservative))
            }
        };
        // Both registrations or neither: a failed impl takes the def back with it.
        let before = self.handles.len();
        let name = self.def_schema(schema, alias)?;
        if let Err(e) = self.impl_with_debug(&name.to_string(), key, kernel, debug) {
            self.handles.truncate(before);
            return Err(e);
        }
        Ok(name)
    }

    /// Registers a kernel for operator `name` at `key` (`None`: the library's key, or
    /// catch-all).
    pub fn impl_(
        &mut self,
        name: &str,
        key: Option<DispatchKey>,
        kernel: KernelFunction,
    ) -> Result<()> {
        self.impl_with_debug(name, key, kernel, None)
    }

    /// Like [`impl_`](Self::impl_) with the kernel's debug name (default `registered at
    /// file:line`).
    pub fn impl_with_debug(
        &mut self,
        name: &str,
        key: Option<DispatchKey>,
        kernel: KernelFunction,
        debug: Option<&str>,
    ) -> Result<()> {
        self.impl_inner(name, key, kernel, debug.map(RegistrationDebug::from))
    }

    /// Like [`impl_with_debug`](Self::impl_with_debug) with a `'static` debug name, which is
    /// kept without a copy (the generated registrations use it).
    pub fn impl_with_static_debug(
        &mut self,
        name: &str,
        key: Option<DispatchKey>,
        kernel: KernelFunction,
        debug: &'static str,
    ) -> Result<()> {
        self.impl_inner(
            name,
            key,
            kernel,
            Some(RegistrationDebug::static_text(debug)),
        )
    }

    fn impl_inner(
        &mut self,
        name: &str,
        key: Option<DispatchKey>,
        kernel: KernelFunction,
        debug: Option<RegistrationDebug>,
    ) -> Result<()> {
        let key = key.filter(|k| *k != DispatchKey::Undefined);
        let parsed = OperatorName::parse(name).map_err(schema_error)?;
        let full = match (parsed.namespace(), &self.ns) {
            (Some(ns), Some(lib_ns)) if ns != lib_ns => {
                return Err(self.error(format!(
                    "impl(\"{name}\", ...): Explicitly provided namespace ({ns}) in operator name \
                     does not match namespace of enclosing {} block ({lib_ns}).  Move this \
                     definition to the {} block corresponding to this namespace (and consider \
                     deleting the namespace from your schema string.) ",
                    self.kind.macro_name(),
                    self.kind.macro_name()
                )))
            }
            (Some(_), _) => parsed,
            (None, Some(lib_ns)) => {
                OperatorName::new(qualified(lib_ns, parsed.name()), parsed.overload_name())
            }
            (None, None) => {
                return Err(self.error(format!(
                    "impl(\"{name}\", ...): an operator name without namespace needs a library \
                     with a namespace."
                )))
            }
        };
        if let (Some(k), Some(lib_key)) = (key, self.key) {
            if k != lib_key {
                let m = self.kind.macro_name();
                return Err(self.error(format!(
                    "impl(\"{name}\", ...): Explicitly provided dispatch key ({k}) is inconsistent \
                     with the dispatch key of the enclosing {m} block ({lib_key}).  Please declare \
                     a separate {m} block for this dispatch key and move your impl() there. "
                )));
            }
        }
        let debug = debug.unwrap_or_else(|| self.debug());
        let h = self
            .dispatcher
            .register_impl(full, key.or(self.key), kernel, debug)?;
        self.handles.push(h);
        Ok(())
    }

    /// Registers a fallthrough for operator `name` at `key`: calls skip `key` for it.
    pub fn fallthrough(&mut self, name: &str, key: DispatchKey) -> Result<()> {
        self.impl_(name, Some(key), KernelFunction::fallthrough())
    }

    /// Registers a backend fallback for every operator at `key` (`None`: the library's key).
    /// Only in IMPL libraries of the wildcard namespace `_`.
    pub fn fallback(&mut self, key: Option<DispatchKey>, kernel: KernelFunction) -> Result<()> {
        if self.kind != LibraryKind::Impl {
            return Err(self.error(format!(
                "fallback(...): Cannot define an operator inside of a {} block.  Did you mean to \
                 call this function inside a TORCH_LIBRARY_IMPL block? ",
                self.kind.macro_name()
            )));
        }
        let Some(key) = key.or(self.key) else {
            return Err(self.error("fallback(...): a fallback needs a dispatch key. ".into()));
        };
        if let Some(ns) = &self.ns {
            return Err(self.error(format!(
                "fallback(...): Fallback functions which apply to only a single namespace (you \
                 specified {ns}) are not supported.  If you intended to apply this fallback \
                 function globally, please define a separate block:\n\n    \
                 TORCH_LIBRARY_IMPL(_, {key}, m) {{ m.fallback(...); }}\n\n"
            )));
        }
        let h = self
            .dispatcher
            .register_fallback(key, kernel, self.debug())?;
        self.handles.push(h);
        Ok(())
    }

    /// Keeps every registration of this library for the life of the dispatcher.
    pub fn leak(mut self) {
        for h in std::mem::take(&mut self.handles) {
            h.leak();
        }
    }
}

impl Drop for Library {
    /// Undoes the library's registrations in the order they were made (as `torch::Library`
    /// destroys its registrars), while the library still holds its dispatcher.
    fn drop(&mut self) {
        self.handles.clear();
    }
}

/// A registration collected at start-up by [`library!`](crate::library!).
pub struct StaticLibrary {
    /// `DEF`, `IMPL` or `FRAGMENT`.
    pub kind: LibraryKind,
    /// The namespace (`_` for any).
    pub ns: &'static str,
    /// The dispatch key of an IMPL library.
    pub key: Option<DispatchKey>,
    /// Where the macro was invoked.
    pub file: &'static str,
    /// The line of the invocation.
    pub line: u32,
    /// The registrations.
    pub register: fn(&mut Library) -> Result<()>,
}

inventory::collect!(StaticLibrary);

static STATIC_ERRORS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// The errors of start-up registrations (each also printed to stderr when it happened).
pub fn static_registration_errors() -> Vec<String> {
    STATIC_ERRORS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
}

pub(crate) fn run_static_registrations(d: &Dispatcher) {
    // Fallback libraries (IMPL `_`) first: a fallback registered while operators exist
    // refreshes every operator's whole table, one registered before them costs nothing per
    // operator. Then DEF libraries, so that IMPL libraries of other crates find their operators
    // defined. (The order changes no outcome: registrations commute.)
    let mut libs: Vec<&StaticLibrary> = inventory::iter::<StaticLibrary>.into_iter().collect();
    libs.sort_by_key(|l| match l.kind {
        LibraryKind::Impl if l.ns == "_" => 0,
        LibraryKind::Def => 1,
        LibraryKind::Fragment => 2,
        LibraryKind::Impl => 3,
    });
    for s in libs {
        let result = Library::create(d, s.kind, s.ns, s.key, Cow::Borrowed(s.file), s.line)
            .and_then(|mut lib| {
                (s.register)(&mut lib)?;
                lib.leak();
                Ok(())
            });
        if let Err(e) = result {
            eprintln!(
                "switchboard: start-up registration at {}:{} failed: {e}",
                s.file, s.line
            );
            STATIC_ERRORS
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(e.to_string());
        }
    }
}

/// Registers operators, kernels or fallbacks into [`Dispatcher::global()`] when it is first
/// used, from any crate (`TORCH_LIBRARY`, `TORCH_LIBRARY_IMPL`, `TORCH_LIBRARY_FRAGMENT`).
///
/// ```
/// use switchboard_dispatcher::{library, DispatchKey, DispatchKeySet, Dispatcher};
/// use switchboard_dispatcher::{KernelFunction, Result};
/// use switchboard_tensor::{ScalarType, Tensor};
///
/// fn twice_cpu(x: &Tensor) -> Result<Tensor> {
///     let v: Vec<f32> = x.to_vec::<f32>()?.iter().map(|v| 2.0 * v).collect();
///     Ok(Tensor::from_vec(v, x.sizes())?)
/// }
///
/// library!(DEF myops, |lib| {
///     lib.def("twice(Tensor x) -> Tensor")?;
///     Ok(())
/// });
/// library!(IMPL myops, CPU, |lib| {
///     lib.impl_("twice", None, KernelFunction::from_fn(twice_cpu))?;
///     Ok(())
/// });
///
/// fn main() -> Result<()> {
///     let twice = Dispatcher::global()
///         .find_schema_or_throw("myops::twice")?
///         .typed::<(Tensor,), Tensor>()?;
///     // Only the CPU key: no autograd layer is linked here.
///     let cpu = DispatchKeySet::from_key(DispatchKey::CPU);
///     let x = Tensor::ones(&[2], ScalarType::Float)?.with_key_set(cpu);
///     assert_eq!(twice.call((&x,))?.to_vec::<f32>()?, [2.0, 2.0]);
///     Ok(())
/// }
/// ```
#[macro_export]
macro_rules! library {
    (DEF $ns:ident, $body:expr) => {
        $crate::library!(@submit $crate::LibraryKind::Def, stringify!($ns), None, $body);
    };
    (FRAGMENT $ns:ident, $body:expr) => {
        $crate::library!(@submit $crate::LibraryKind::Fragment, stringify!($ns), None, $body);
    };
    (IMPL $ns:tt, $key:ident, $body:expr) => {
        $crate::library!(@submit $crate::LibraryKind::Impl, stringify!($ns),
            Some($crate::DispatchKey::$key), $body);
    };
    (@submit $kind:expr, $ns:expr, $key:expr, $body:expr) => {
        $crate::inventory::submit! {
            $crate::StaticLibrary {
                kind: $kind,
                ns: $ns,
                key: $key,
                file: file!(),
                line: line!(),
                register: $body,
            }
        }
    };
}

/// `ns::name`, without the formatting machinery (a registration qualifies every name it gets).
/// The error for a schema or operator name that does not parse.
fn schema_error(e: impl std::fmt::Display) -> DispatchError {
    DispatchError::from(DispatchErrorKind::Schema(e.to_string()))
}

fn qualified(ns: &str, name: &str) -> String {
    let mut s = String::with_capacity(ns.len() + 2 + name.len());
    s.push_str(ns);
    s.push_str("::");
    s.push_str(name);
    s
}
