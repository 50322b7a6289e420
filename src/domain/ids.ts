/** Ids Coffer issues: backups, uploads and the like are UUIDs (v7 from the services, v4 from the blob stores). */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Whether `value` has the shape of a UUID (any version, either case). */
export const isUuid = (value: string): boolean => UUID.test(value);
