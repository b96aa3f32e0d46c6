CREATE PROCEDURE refreshSemaphoreLock(IN tokenIn VARCHAR(64), IN timeoutSec INT)
    MODIFIES SQL DATA
    SQL SECURITY INVOKER
BEGIN
    /* as upstream: blind to expiry, so an expired lease nobody took is revived */
    UPDATE SEMAPHORE_LOCK SET EXPIRES_ON = UTC_TIMESTAMP(6) + INTERVAL timeoutSec SECOND
        WHERE TOKEN = tokenIn;
    SELECT ROW_COUNT() AS RESULT;
END
