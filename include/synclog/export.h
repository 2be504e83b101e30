// What libsynclog.so exports. The shared library is built with hidden
// visibility, so only what carries SYNCLOG_API (the public API) is linkable
// from outside; internals cannot clash with an engine's own symbols or be
// depended on by accident. tests/package_test.sh checks the export list.
#pragma once

#define SYNCLOG_API __attribute__((visibility("default")))
