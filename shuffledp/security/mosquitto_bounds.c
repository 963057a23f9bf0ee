/*
 * shuffledp's per-role bounds for Mosquitto 2.0: a client account may not retain messages, and
 * may not publish a payload over its report size (shuffledp/security/broker_limits.py).
 *
 * Why a plugin: Mosquitto 2.0 has these bounds only as options that apply to every client alike
 * (max_packet_size, retain_available), and its dynamic-security plugin has no rule on the retain
 * flag or the size (its ACL types are publishClientSend/Receive, subscribe and unsubscribe on a
 * topic). The ACL check a v5 plugin registers (MOSQ_EVT_ACL_CHECK) sees the publishing client,
 * the retain flag and the payload length of every PUBLISH and will, before the broker stores or
 * delivers it: that is the one place where a per-account rule on them can be added.
 *
 * It never widens access. Mosquitto 2.0.11 runs the ACL callbacks in registration order, plugins
 * first (the acl_file's check is registered after them), and stops at the first answer that is
 * not MOSQ_ERR_PLUGIN_DEFER. This plugin answers MOSQ_ERR_ACL_DENIED or MOSQ_ERR_PLUGIN_DEFER,
 * never MOSQ_ERR_SUCCESS: what it does not refuse goes on to the acl_file as before. (Without an
 * acl_file every deferred check would be denied: shuffledp loads it only with one.)
 *
 * Options (plugin_opt_<key> <value> in mosquitto.conf), both required:
 *   client_payload_bytes  the largest payload a bounded account may publish (decimal, >= 1);
 *   stage_accounts        a POSIX extended regular expression: usernames that match it in full
 *                         are stages and are left alone; every other client (clients-<j>, an
 *                         unknown username, an anonymous client) is bounded.
 * A bounded client's PUBLISH (or will) with the retain flag, or with a payload over the limit, is
 * refused: Mosquitto drops it (a QoS 1 sender gets PUBACK "not authorized" under MQTT 5, a plain
 * PUBACK under 3.1.1) and delivers it to no one. Subscriptions and deliveries are not touched.
 * Refusals are logged as warnings, the 1st, 2nd, 4th, 8th, ... (a flood cannot fill the log).
 */
#include <errno.h>
#include <regex.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mosquitto.h>
#include <mosquitto_broker.h>
#include <mosquitto_plugin.h>

#define PLUGIN_NAME "shuffledp-bounds"

struct bounds {
	mosquitto_plugin_id_t *id;
	regex_t stages;
	bool stages_compiled;
	unsigned long client_payload;
	unsigned long refused;
};

int mosquitto_plugin_version(int supported_version_count, const int *supported_versions)
{
	for(int i = 0; i < supported_version_count; i++){
		if(supported_versions[i] == 5){
			return 5;
		}
	}
	return -1;
}

static bool is_stage(const struct bounds *b, const char *username)
{
	regmatch_t match;

	if(username == NULL){
		return false;
	}
	if(regexec(&b->stages, username, 1, &match, 0) != 0){
		return false;
	}
	return match.rm_so == 0 && (size_t)match.rm_eo == strlen(username);
}

static void note_refusal(struct bounds *b, const struct mosquitto_evt_acl_check *ed,
		const char *username, const char *why)
{
	b->refused++;
	if((b->refused & (b->refused - 1)) != 0){
		return; /* log only the 1st, 2nd, 4th, 8th, ... refusal */
	}
	mosquitto_log_printf(MOSQ_LOG_WARNING,
			PLUGIN_NAME ": refused a PUBLISH of %lu bytes%s from user %s to %s: %s "
			"(%lu refused so far)",
			(unsigned long)ed->payloadlen, ed->retain ? " (retained)" : "",
			username ? username : "(anonymous)", ed->topic ? ed->topic : "?", why, b->refused);
}

static int acl_check(int event, void *event_data, void *userdata)
{
	struct bounds *b = userdata;
	struct mosquitto_evt_acl_check *ed = event_data;
	const char *username;

	(void)event;
	if(ed->access != MOSQ_ACL_WRITE){
		return MOSQ_ERR_PLUGIN_DEFER;
	}
	username = mosquitto_client_username(ed->client);
	if(is_stage(b, username)){
		return MOSQ_ERR_PLUGIN_DEFER;
	}
	if(ed->retain){
		note_refusal(b, ed, username, "a client account may not retain messages");
		return MOSQ_ERR_ACL_DENIED;
	}
	if(ed->payloadlen > b->client_payload){
		note_refusal(b, ed, username, "over a client account's payload bound");
		return MOSQ_ERR_ACL_DENIED;
	}
	return MOSQ_ERR_PLUGIN_DEFER;
}

static int read_options(struct bounds *b, struct mosquitto_opt *options, int option_count)
{
	const char *limit = NULL, *stages = NULL;
	char *end;
	int rc;

	for(int i = 0; i < option_count; i++){
		if(!strcmp(options[i].key, "client_payload_bytes")){
			limit = options[i].value;
		}else if(!strcmp(options[i].key, "stage_accounts")){
			stages = options[i].value;
		}
	}
	if(limit == NULL || stages == NULL){
		mosquitto_log_printf(MOSQ_LOG_ERR, PLUGIN_NAME ": plugin_opt_client_payload_bytes and "
				"plugin_opt_stage_accounts are both required");
		return MOSQ_ERR_INVAL;
	}
	errno = 0;
	b->client_payload = strtoul(limit, &end, 10);
	if(errno != 0 || end == limit || *end != '\0' || b->client_payload == 0 || limit[0] == '-'){
		mosquitto_log_printf(MOSQ_LOG_ERR, PLUGIN_NAME ": plugin_opt_client_payload_bytes must "
				"be a positive decimal integer, got \"%s\"", limit);
		return MOSQ_ERR_INVAL;
	}
	rc = regcomp(&b->stages, stages, REG_EXTENDED);
	if(rc != 0){
		mosquitto_log_printf(MOSQ_LOG_ERR, PLUGIN_NAME ": plugin_opt_stage_accounts must be a "
				"POSIX extended regular expression, got \"%s\"", stages);
		return MOSQ_ERR_INVAL;
	}
	b->stages_compiled = true;
	return MOSQ_ERR_SUCCESS;
}

static void release(struct bounds *b)
{
	if(b->stages_compiled){
		regfree(&b->stages);
	}
	free(b);
}

int mosquitto_plugin_init(mosquitto_plugin_id_t *identifier, void **userdata,
		struct mosquitto_opt *options, int option_count)
{
	struct bounds *b = calloc(1, sizeof(*b));
	int rc;

	if(b == NULL){
		return MOSQ_ERR_NOMEM;
	}
	rc = read_options(b, options, option_count);
	if(rc == MOSQ_ERR_SUCCESS){
		b->id = identifier;
		rc = mosquitto_callback_register(identifier, MOSQ_EVT_ACL_CHECK, acl_check, NULL, b);
	}
	if(rc != MOSQ_ERR_SUCCESS){
		release(b);
		return rc;
	}
	*userdata = b;
	mosquitto_log_printf(MOSQ_LOG_INFO, PLUGIN_NAME ": client accounts may publish at most %lu "
			"bytes and retain nothing", b->client_payload);
	return MOSQ_ERR_SUCCESS;
}

int mosquitto_plugin_cleanup(void *userdata, struct mosquitto_opt *options, int option_count)
{
	struct bounds *b = userdata;

	(void)options;
	(void)option_count;
	if(b != NULL){
		mosquitto_callback_unregister(b->id, MOSQ_EVT_ACL_CHECK, acl_check, NULL);
		release(b);
	}
	return MOSQ_ERR_SUCCESS;
}
