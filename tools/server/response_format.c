/*
 * response_format.c: see response_format.h. The schema is re-serialised
 * compactly and checked by the library's own compiler
 * (clover_json_schema_check), so the server refuses exactly what the
 * engine cannot honour, with the engine's words.
 */
#include "response_format.h"

#include <stdlib.h>
#include <string.h>

#include "clover.h"

#define TYPE_INVALID "invalid_request_error"

int response_format_parse(json_t *root, char **schema, server_error *e) {
    *schema = NULL;
    json_t *v = json_object_get(root, "response_format");
    if (!v || json_is_null(v)) return 0;
    json_t *t = json_is_object(v) ? json_object_get(v, "type") : NULL;
    if (!json_is_string(t))
        return server_error_set(e, 400, TYPE_INVALID, "invalid_type", "response_format",
                                "response_format: expected {\"type\": \"text\" | \"json_object\" | \"json_schema\", ...}");
    const char *type = json_string_value(t);
    if (!strcmp(type, "text")) return 0;
    const char *text = NULL;
    char *dumped = NULL;
    if (!strcmp(type, "json_object")) {
        text = "{\"type\":\"object\"}";
    } else if (!strcmp(type, "json_schema")) {
        json_t *js = json_object_get(v, "json_schema");
        json_t *s = json_is_object(js) ? json_object_get(js, "schema") : NULL;
        if (!s)
            return server_error_set(e, 400, TYPE_INVALID, "invalid_value", "response_format.json_schema.schema",
                                    "response_format.json_schema.schema: expected a JSON schema (an object)");
        if (!json_is_object(s) && !json_is_boolean(s))
            return server_error_set(e, 400, TYPE_INVALID, "invalid_type", "response_format.json_schema.schema",
                                    "response_format.json_schema.schema: expected a JSON schema (an object)");
        dumped = json_dumps(s, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);
        if (!dumped) return server_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
        text = dumped;
    } else {
        return server_error_set(e, 400, TYPE_INVALID, "invalid_value", "response_format.type",
                                "response_format.type: \"%.40s\" is not one of text, json_object, json_schema", type);
    }
    clover_error err = {0};
    if (clover_json_schema_check(text, &err) != CLOVER_OK) {
        free(dumped);
        return server_error_set(e, 400, TYPE_INVALID, "unsupported_schema", "response_format.json_schema.schema",
                                "response_format: %s", err.message);
    }
    *schema = dumped ? dumped : strdup(text);
    if (!*schema) return server_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
    return 0;
}
