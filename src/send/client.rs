//! A remoting connection to one peer (name server or broker): requests matched to responses by
//! opaque, several in flight, each signed when ACL keys are given.
