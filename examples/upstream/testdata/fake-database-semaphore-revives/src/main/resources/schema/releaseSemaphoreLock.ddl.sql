CREATE PROCEDURE releaseSemaphoreLock(IN tokenIn VARCHAR(64))
    MODIFIES SQL DATA
    SQL SECURITY INVOKER
BEGIN
    /* as upstream: blind to expiry, so releasing an expired lease answers ok */
    UPDATE SEMAPHORE_LOCK SET TOKEN = NULL, EXPIRES_ON = NULL
        WHERE TOKEN = tokenIn;
    SELECT ROW_COUNT() AS RESULT;
END
