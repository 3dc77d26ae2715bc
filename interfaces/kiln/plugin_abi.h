/* The plugin descriptor: the only thing the loader reads from a library before trusting it.
 *
 * Plain C so that it can be read and checked whatever compiler built the library. Every Kiln
 * plugin library exports one `kiln_library_v1` through Boost.DLL's sectioned alias (section
 * "kilnplug", symbol KILN_LIBRARY_SYMBOL); the loader confirms the section exists, loads the
 * library with immediate binding, reads the struct and checks abi_major, abi_minor,
 * struct_size, toolchain_key and contract_fingerprint before it calls anything in the library.
 *
 * Versioning rules (docs/plugin-abi.md): any change to a struct here other than appending bumps
 * KILN_ABI_MAJOR; appending an optional field, or a value to one of its enums, bumps
 * KILN_ABI_MINOR (the host accepts abi_minor <= its own). Changes to the C++ contract (the
 * interfaces/ classes, the SDK's headers) are covered by contract_fingerprint instead.
 */
#ifndef KILN_PLUGIN_ABI_H
#define KILN_PLUGIN_ABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_ABI_MAJOR 2
#define KILN_ABI_MINOR 2
/* Exported symbol name and the ELF section that holds it. */
#define KILN_LIBRARY_SYMBOL "kiln_plugin_library"
#define KILN_LIBRARY_SECTION "kilnplug"

/* What a plugin implements; the config table that selects it is given in brackets. */
typedef enum kiln_plugin_kind {
  KILN_KIND_BACKEND = 1,      /* [backend]    kiln::Backend */
  KILN_KIND_MODEL = 2,        /* [model]      kiln::Model */
  KILN_KIND_DATA = 3,         /* [data.*]     kiln::DataSource */
  KILN_KIND_COMMUNICATOR = 4, /* [comm]       kiln::Communicator */
  KILN_KIND_PRECISION = 5     /* [precision]  kiln::PrecisionPolicy */
} kiln_plugin_kind;

/* Types a parameter may have; they map onto TOML values (see params.hpp). Appending a type bumps
 * KILN_ABI_MINOR, so an older host refuses a plugin that declares one it does not know. */
typedef enum kiln_param_type {
  KILN_PARAM_BOOL = 1,
  KILN_PARAM_INT = 2,
  KILN_PARAM_FLOAT = 3, /* an integer literal is accepted and widened */
  KILN_PARAM_STRING = 4,
  KILN_PARAM_INT_LIST = 5,
  KILN_PARAM_FLOAT_LIST = 6,
  KILN_PARAM_STRING_LIST = 7,
  /* A file or directory, given as a TOML string. The plugin reads it as a string (ParamMap
   * gives std::string), already absolute: the host resolves a relative value against the
   * directory of the config file that set it (the working directory for --set values and for
   * schema defaults); an empty value stays empty. ABI 2.1. */
  KILN_PARAM_PATH = 8
} kiln_param_type;

/* kiln_param_spec_v1.flags (ABI 2.2). */
#define KILN_PARAM_ALLOW_NONFINITE 1u /* a float (or float list) may be inf or nan */
#define KILN_PARAM_MIN_EXCLUSIVE 2u   /* the value must be > min, not >= min */
#define KILN_PARAM_MAX_EXCLUSIVE 4u   /* the value must be < max, not <= max */

/* One parameter of a plugin's config table. Entries of a plugin built for ABI 2.0/2.1 end at
 * `doc`: the host walks such a table with that shorter stride and reads the fields after it as
 * zeros (unbounded; floats must still be finite). */
typedef struct kiln_param_spec_v1 {
  const char* name;          /* key in the table, snake_case */
  uint32_t type;             /* kiln_param_type */
  const char* default_value; /* a TOML literal ("0.2", "[128]", "\"relu\""); NULL = required */
  const char* choices;       /* for strings: allowed values separated by '|'; NULL = any */
  const char* doc;           /* one sentence, shown by `kiln plugins show` */
  /* ABI 2.2. Bounds as TOML number literals ("0", "1e-12"); NULL = unbounded on that side. They
   * apply to ints, floats and every element of int and float lists. */
  const char* min;
  const char* max;
  uint32_t flags; /* KILN_PARAM_* flags above; 0 = inclusive bounds, finite floats only */
} kiln_param_spec_v1;

/* One plugin. A library may export several (comm-nccl exports nccl-ring and nccl-tree). */
typedef struct kiln_plugin_v1 {
  uint32_t struct_size;                /* sizeof(kiln_plugin_v1) as the plugin saw it */
  uint32_t kind;                       /* kiln_plugin_kind */
  const char* name;                    /* unique across the search path, e.g. "cpu", "mlp" */
  const char* version;                 /* the plugin's own version, e.g. "0.1.0" */
  const char* summary;                 /* one line for `kiln plugins list` */
  const kiln_param_spec_v1* params;    /* schema of its config table (without "type") */
  uint32_t num_params;
  /* Factory: `args` is a `const kiln::PluginArgs*`; returns the kind's interface pointer
   * (e.g. `kiln::Backend*`) converted to void*. May throw kiln::Error (C++ only: the toolchain
   * key guarantees both sides share one C++ ABI). Never returns NULL. */
  void* (*create)(const void* args);
  /* Destroys an object made by create(), in the library that allocated it. */
  void (*destroy)(uint32_t kind, void* object);
} kiln_plugin_v1;

/* The exported descriptor of one library. */
typedef struct kiln_library_v1 {
  uint32_t struct_size;        /* sizeof(kiln_library_v1) as the plugin saw it */
  uint16_t abi_major;          /* must equal the host's KILN_ABI_MAJOR */
  uint16_t abi_minor;          /* must be <= the host's KILN_ABI_MINOR */
  const char* toolchain_key;   /* must equal the host's KILN_TOOLCHAIN_KEY (kiln/version.hpp) */
  const char* kiln_version;    /* Kiln SDK version the library was built against */
  uint32_t num_plugins;
  const kiln_plugin_v1* plugins;
  /* Fingerprint (16 hex digits) of the exact contract and SDK headers the library was compiled
   * against; must equal the host's. Covers every installed header, so a plugin built against a
   * drifted copy of the contract (a virtual added or removed) is refused, never loaded. ABI 2. */
  const char* contract_fingerprint;
} kiln_library_v1;

#ifdef __cplusplus
}
#endif
#endif /* KILN_PLUGIN_ABI_H */
