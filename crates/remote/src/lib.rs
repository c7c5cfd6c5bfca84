use tarpc as _;
