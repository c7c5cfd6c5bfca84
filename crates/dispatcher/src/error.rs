//! The dispatcher's error type.

use switchboard_keys::DispatchKey;

/// An error of the dispatcher: what went wrong is its [`kind`](DispatchError::kind); the message
/// names the operator, and where it applies the key and the argument, in PyTorch's words.
///
/// One pointer wide, so that `Result<Tensor, DispatchError>` is returned in registers on the
/// hot path.
#[derive(Clone, PartialEq)]
pub struct DispatchError(Box<DispatchErrorKind>);

impl DispatchError {
    /// What went wrong.
    pub fn kind(&self) -> &DispatchErrorKind {
        &self.0
    }

    /// The kind, by value.
    pub fn into_kind(self) -> DispatchErrorKind {
        *self.0
    }
}

impl From<DispatchErrorKind> for DispatchError {
    #[cold]
    fn from(kind: DispatchErrorKind) -> Self {
        DispatchError(Box::new(kind))
    }
}

impl std::fmt::Display for DispatchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::fmt::Debug for DispatchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for DispatchError {}

/// What went wrong when registering or calling an operator.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DispatchErrorKind {
    /// No kernel for the key a call dispatched to.
    #[error(
        "Could not run '{op}' with arguments from the '{key}' backend. This could be because the \
         operator doesn't exist for this backend, or was omitted during the selective/custom \
         build process (if using custom build). '{op}' is only available for these backends: \
         [{available}].{hint}"
    )]
    NoKernel {
        /// The operator.
        op: String,
        /// The key the call dispatched to.
        key: DispatchKey,
        /// The runtime keys that have a kernel, comma-separated.
        available: String,
        /// A suggestion, possibly empty (starts with a space).
        hint: String,
    },
    /// A call without any dispatch key (no tensor argument, nothing included by the thread).
    #[error(
        "There were no tensor arguments to this function (e.g., you passed an empty list of \
         Tensors), but no fallback function is registered for schema {op}.  This usually means \
         that this function requires a non-empty list of Tensors, or that you (the operator \
         writer) forgot to register a fallback function.  Available functions are [{available}]."
    )]
    NoTensorArguments {
        /// The operator.
        op: String,
        /// The runtime keys that have a kernel, comma-separated.
        available: String,
    },
    /// A typed handle whose calling convention does not fit the operator's schema.
    #[error("{0}")]
    WrongSignature(String),
    /// A call reached the AutogradOther slot of an operator whose CompositeImplicitAutograd
    /// kernel is ambiguous there. The message is PyTorch's, word for word (the note it cites
    /// is in PyTorch's dispatcher, not here).
    #[error(
        "{op} has kernels registered to both CompositeImplicitAutograd and a backend mapped to \
         AutogradOther. This makes the backend kernel unreachable; the dispatcher will always \
         prefer the CompositeImplicitAutograd lowering (see Note [Ambiguity in AutogradOther \
         kernel]). If you want to override CompositeImplicitAutograd, please open an issue to \
         request a dedicated Autograd dispatch key for the backend.\nIf you only want to run \
         inference instead of training, in C++, add `c10::InferenceMode mode;` before model.forward()."
    )]
    AmbiguousAutogradOther {
        /// The operator.
        op: String,
    },
    /// No operator of that name is registered.
    #[error("Could not find schema for {name}.{suggestions}")]
    UnknownOperator {
        /// The name asked for.
        name: String,
        /// " Did you mean ...?" or empty.
        suggestions: String,
    },
    /// An introspection query named an operator that is not registered at all (neither defined
    /// nor implemented).
    #[error("operator {0} does not exist")]
    NoSuchOperator(String),
    /// An introspection query got a key it cannot answer for (an alias key where a runtime key
    /// is needed, a key without a kernel); the message is PyTorch's.
    #[error("{0}")]
    InvalidKey(String),
    /// A registration was refused; the message is PyTorch's.
    #[error("{0}")]
    Registration(String),
    /// A schema string did not parse.
    #[error("{0}")]
    Schema(String),
    /// A boxed call had the wrong number of arguments.
    #[error("{op}() expected at most {expected} argument(s) but received {got} argument(s).")]
    ArgumentCount {
        /// The operator.
        op: String,
        /// How many the schema takes.
        expected: usize,
        /// How many the stack held.
        got: usize,
    },
    /// A boxed call had an argument of the wrong type.
    #[error("{op}() Expected a value of type '{expected}' for argument '{arg}' but instead found type '{got}'.")]
    ArgumentType {
        /// The operator.
        op: String,
        /// The argument's schema name.
        arg: String,
        /// The schema type.
        expected: String,
        /// What the stack held.
        got: String,
    },
    /// A typed kernel whose Rust signature does not fit the operator's schema.
    #[error("{0}")]
    SchemaMismatch(Box<SchemaMismatch>),
    /// An error raised by a kernel (a shape mismatch, a bad dtype, ...).
    #[error("{0}")]
    Kernel(String),
    /// An error of the tensor runtime raised by a kernel (a shape mismatch, a bad dtype, a dim
    /// out of range, ...), with PyTorch's message.
    #[error("{0}")]
    Tensor(#[from] switchboard_tensor::TensorError),
}

impl From<switchboard_tensor::TensorError> for DispatchError {
    /// Lets kernels written against the tensor runtime use `?` inside dispatcher kernels.
    #[cold]
    fn from(e: switchboard_tensor::TensorError) -> Self {
        DispatchErrorKind::Tensor(e).into()
    }
}

/// The dispatcher's result type.
pub type Result<T, E = DispatchError> = std::result::Result<T, E>;

impl DispatchError {
    /// The first line of the message (what the conformance data compares).
    pub fn first_line(&self) -> String {
        self.to_string()
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned()
    }
}

/// The details of [`DispatchErrorKind::SchemaMismatch`] (boxed: the error stays small).
#[derive(Debug, Clone, PartialEq)]
pub struct SchemaMismatch {
    /// The operator.
    pub op: String,
    /// The declared schema.
    pub expected: String,
    /// Where it was declared.
    pub expected_debug: String,
    /// The schema inferred from the Rust signature.
    pub inferred: String,
    /// Where the kernel was registered.
    pub inferred_debug: String,
    /// Why they differ.
    pub reason: String,
}

impl std::fmt::Display for SchemaMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Inferred operator schema for a C++ kernel function doesn't match the expected function \
             schema.\n  operator: {}\n  expected schema: {}\n    {}\n  inferred schema: {}\n    {}\n  \
             reason: {}",
            self.op, self.expected, self.expected_debug, self.inferred, self.inferred_debug, self.reason
        )
    }
}
