//! Text as wheelhouse reads and writes it: YAML with YAML 1.1's scalars (as Kubernetes
//! clients read it), text from the cluster made safe for a terminal, URLs without their credentials, and
//! ages.

pub mod age;
pub mod escape;
pub mod url;
pub mod yaml;
